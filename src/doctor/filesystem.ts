/**
 * Which filesystem the transcripts live on, and what that means for an operator: a network
 * filesystem is how workers on several hosts share them; tmpfs or a container's own layer lose
 * them. statfs(2) gives a magic number; unknown numbers fall back to `df -PT`.
 */
import { spawnSync } from "node:child_process";
import { statfsSync } from "node:fs";

/** statfs f_type magic numbers (linux/magic.h and the filesystems' own headers). */
const MAGIC: Record<number, string> = {
  0xef53: "ext4",
  0x58465342: "xfs",
  0x9123683e: "btrfs",
  0x2fc12fc1: "zfs",
  0xf2f52010: "f2fs",
  0x01021994: "tmpfs",
  0x858458f6: "ramfs",
  0x794c7630: "overlay",
  0x6969: "nfs",
  0xff534d42: "cifs",
  0xfe534d42: "smb2",
  0x65735546: "fuse",
  0x01021997: "9p",
  0x00c36400: "ceph",
  0x0bd00bd0: "lustre",
  0x47504653: "gpfs",
  0x5346414f: "afs",
  0x4d44: "vfat",
  0x5346544e: "ntfs",
};

const NETWORK = new Set([
  "nfs",
  "nfs4",
  "cifs",
  "smb2",
  "smb3",
  "9p",
  "ceph",
  "lustre",
  "gpfs",
  "afs",
  "glusterfs",
  "fuse.glusterfs",
  "fuse.sshfs",
  "fuse",
  "virtiofs",
]);
const VOLATILE = new Set(["tmpfs", "ramfs"]);

export interface FilesystemInfo {
  type: string;
  freeBytes: number;
  totalBytes: number;
}

export function filesystemName(magic: number): string | undefined {
  return MAGIC[magic];
}

/** The `Type` column of `df -PT <dir>` (second field of the data line). */
export function parseDfType(output: string): string | undefined {
  const line = output.trim().split("\n")[1];
  return line?.trim().split(/\s+/)[1];
}

export function filesystemOf(dir: string): FilesystemInfo {
  const s = statfsSync(dir);
  let type = filesystemName(s.type);
  if (!type) {
    const df = spawnSync("df", ["-PT", dir], { encoding: "utf8", timeout: 3000 });
    type = (df.status === 0 && parseDfType(df.stdout)) || `unknown (statfs type 0x${s.type.toString(16)})`;
  }
  return { type, freeBytes: s.bavail * s.bsize, totalBytes: s.blocks * s.bsize };
}

/** A note for people about transcripts on this filesystem, or undefined when nothing to say. */
export function filesystemNote(type: string): { level: "ok" | "warn"; note: string } | undefined {
  if (VOLATILE.has(type)) return { level: "warn", note: "in memory: transcripts are lost on reboot" };
  if (type === "overlay")
    return {
      level: "warn",
      note: "a container's own layer: transcripts go with the container; mount a volume at the state dir",
    };
  if (NETWORK.has(type)) return { level: "ok", note: "network filesystem: workers on several hosts can share it" };
  return undefined;
}

export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

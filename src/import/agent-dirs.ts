/**
 * The agent directories under `<stateDir>/agents`, for both store readers. A symlink to a
 * directory counts as one: OpenClaw opens its stores by path, so an agent directory moved to
 * another disk and linked back is read through the link, and the import must read it too.
 */
import { readdir, readlink, stat } from "node:fs/promises";
import { join } from "node:path";

export interface AgentDir {
  /** The name under `agents/` (the agent id, before validation). */
  name: string;
  /** `<stateDir>/agents/<name>` (the link itself when it is one: reports name what the user sees). */
  path: string;
}

export interface AgentDirs {
  dirs: AgentDir[];
  /**
   * Symlinks under `agents/` whose target cannot be read (an agent directory on a disk that is not
   * mounted): their sessions would be missing from the import, so the readers say why.
   */
  broken: { path: string; detail: string }[];
}

export async function listAgentDirs(stateDir: string): Promise<AgentDirs> {
  const agentsDir = join(stateDir, "agents");
  const entries = await readdir(agentsDir, { withFileTypes: true }).catch(() => []);
  const dirs: AgentDir[] = [];
  const broken: AgentDirs["broken"] = [];
  for (const d of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(agentsDir, d.name);
    if (d.isDirectory()) {
      dirs.push({ name: d.name, path });
      continue;
    }
    if (!d.isSymbolicLink()) continue;
    const target = await readlink(path).catch(() => "?");
    const st = await stat(path).catch((err: NodeJS.ErrnoException) => err);
    if (st instanceof Error)
      broken.push({ path, detail: `agent directory is a symlink to ${target}, which cannot be read (${st.code})` });
    // A link to a file is no more an agent directory than a file is.
    else if (st.isDirectory()) dirs.push({ name: d.name, path });
  }
  return { dirs, broken };
}

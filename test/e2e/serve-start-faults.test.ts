/**
 * What happens to a `switchboard start` / `worker` process while it is starting. A SIGTERM after
 * its workers started but before `ready` (the gateway still loading) stops it as a stop after
 * `ready` does: its turns finish or are handed back, no lease is left held, the next worker runs
 * them at once (not after the overdue-wake check) and its registry record goes. A state dir on a
 * full disk is a storage fault, not a configuration error: the worker starts, says why, and its
 * turns park until space returns (docs/concepts/shutdown.md, docs/concepts/reliability.md).
 */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { listProcesses } from "../../src/deployment/process-registry.js";
import { CLI, ROOT, spawnSwitchboard, startPeer, startTestSystem, writeConfigFile } from "../helpers/system.js";
import { tempDir } from "../helpers/context.js";
import { getRun, inbound, scriptConfig, timedWait } from "../fixtures/runs-support.js";
import { settle } from "../helpers/settle.js";
import { fillDisk } from "../helpers/disk-full.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await Promise.resolve(c()).catch(() => {});
});

/** What the overdue-wake check would cost: a lost turn is picked up only after this. */
const OVERDUE_CHECK_MS = 30_000;

describe("a signal while starting", () => {
  it("SIGTERM after the workers started, before ready: clean exit, no lease held, turns run at once", async () => {
    // Turns long enough to be running when the signal comes, and a grace shorter than them: handed back.
    const sys = await startTestSystem(
      scriptConfig([{ delayMs: 1500, reply: "re: {{text}}" }], { workers: { shutdownGraceMs: 200 } }),
      { gateway: true, workers: false },
    );
    cleanups.push(() => sys.close());
    const runs = [];
    for (let i = 0; i < 4; i++) runs.push(await inbound(sys, `peer${i}`, `hello ${i}`));

    const file = writeConfigFile({ ...sys.config, gateway: { ...sys.config.gateway, port: 0 } });
    const child = spawn(process.execPath, [CLI, "start", "--config", file], {
      cwd: ROOT,
      env: {
        ...process.env,
        LOG_LEVEL: "info",
        REDIS_URL: sys.config.redis.url,
        SWITCHBOARD_STATE_DIR: sys.config.storage.dir,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    cleanups.push(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"));
    const exited = once(child, "exit");
    let out = "";
    let signalled = false;
    const onData = (d: Buffer) => {
      out += d;
      // Right after the workers start: they fetch jobs and pop the ready list while the gateway loads.
      if (!signalled && out.includes('"workers started"')) {
        signalled = true;
        child.kill("SIGTERM");
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
    const stoppedAt = Date.now();
    expect(signalled, out).toBe(true);
    expect(out, "the signal came before ready").not.toMatch(/start ready/);
    expect({ code, signal }, out).toEqual({ code: 0, signal: null });

    // Nothing of it is left: no session lease, no registry record.
    for (const r of runs) expect(await sys.svc.redis.exists(sys.svc.keys.lease(r.sessionKey))).toBe(0);
    expect((await listProcesses(sys.svc.redis)).map((p) => p.pid)).not.toContain(child.pid);

    // The next worker runs every turn promptly, each once.
    const next = await startPeer(sys.config, { workers: {} });
    cleanups.push(() => next.close());
    for (const r of runs) {
      const { result } = await timedWait(sys, r.runId, 15_000);
      expect(result).toMatchObject({ status: "ok", reply: `re: hello ${runs.indexOf(r)}` });
    }
    expect(Date.now() - stoppedAt).toBeLessThan(OVERDUE_CHECK_MS / 3);
    for (const r of runs) expect((await getRun(sys, r.runId)).status).toBe("ok");
  }, 60_000);
});

/** Whether this process may mount a tmpfs (root, and a kernel/container that allows it). */
function canMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  const { dir, cleanup } = tempDir("sb-mount-probe");
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], { stdio: "ignore" });
    execFileSync("umount", [dir], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    cleanup();
  }
}

describe.skipIf(!canMount())("a worker started on a full disk (root: tmpfs)", () => {
  it("starts with a warning, storage shown unhealthy; its turn parks and finishes once space is freed", async () => {
    const { dir: disk, cleanup } = tempDir("sb-full");
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", disk]);
    cleanups.push(() => {
      execFileSync("umount", ["-l", disk]);
      cleanup();
    });
    const sys = await startTestSystem(
      scriptConfig([{ delayMs: 5, reply: "re: {{text}}" }], { storage: { dir: disk, faultRetryMaxDelayMs: 400 } }),
      { gateway: true, workers: false },
    );
    cleanups.push(() => sys.close());
    const free = fillDisk(disk);

    const worker = await spawnSwitchboard(["worker", "--config", writeConfigFile(sys.config)], {
      REDIS_URL: sys.config.redis.url,
      SWITCHBOARD_STATE_DIR: disk,
    });
    cleanups.push(() => worker.kill9());
    expect(worker.output()).toMatch(
      /^warning: storage: cannot create or write the state dir .*ENOSPC.*: starting anyway, turns are parked/m,
    );
    expect(worker.output()).not.toMatch(/invalid_config/);
    // Not only in its output: the deployment's health says so (reported as the worker starts).
    const ready = await settle(
      async () => {
        const r = await sys.get("/readyz");
        return r.body.storage === "unhealthy" ? r : null;
      },
      { what: "/readyz saying storage is unhealthy", timeoutMs: 10_000 },
    );
    expect(ready.body).toMatchObject({ ok: true, storage: "unhealthy", code: "ENOSPC" });

    const r = await inbound(sys, "full", "hello on a full disk");
    await settle(async () => await sys.svc.redis.hget(sys.svc.keys.run(r.runId), "storageFaultSince"), {
      what: "the turn parked on the full disk",
      timeoutMs: 10_000,
    });
    free();
    const { result } = await timedWait(sys, r.runId, 15_000);
    expect(result).toMatchObject({ status: "ok", reply: "re: hello on a full disk" });
    await worker.stop();
    expect(worker.child.exitCode).toBe(0);
  }, 60_000);
});

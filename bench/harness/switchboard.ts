/**
 * Everything the bench needs from Switchboard's internals, in one place: when the turn
 * pipeline changes, this is the module to adapt. The figures talk to Switchboard through
 * these functions, its HTTP API, or its CLI processes.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { parseConfig, type Config, type ConfigInput } from "../../src/config/index.js";
import { startSystem, type SwitchboardSystem } from "../../src/app/system.js";
import type { Services } from "../../src/app/services.js";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { benchClient } from "./redis.js";
import { roundTrips } from "./round-trips.js";

export type { SwitchboardSystem, Services, Config, ConfigInput };

/** `storage.fsync: "always"` is accepted by this version's config (it is a newer setting). */
export function fsyncAlwaysSupport(): { ok: true } | { ok: false; why: string } {
  try {
    parseConfig({ storage: { fsync: "always" } });
    return { ok: true };
  } catch (err) {
    return {
      ok: false,
      why: `this build's config rejects storage.fsync (${(err as Error).message.replace(/\s+/g, " ").trim()})`,
    };
  }
}

export interface BenchDeployment {
  config: Config;
  /** Removes the storage dir (transcripts). */
  cleanup(): void;
}

/**
 * A fresh deployment on the bench Redis: its own key prefix and storage dir, gateway on a free
 * port. Sessions reset daily in the host's zone, as with no reset configured, so each turn and
 * message does the freshness work the default costs; but at the local hour twelve hours from
 * now, so no run crosses a reset.
 */
export function benchDeployment(
  redisUrl: string,
  extra: ConfigInput = {},
  opts: { concurrency?: number; fsync?: "always" } = {},
): BenchDeployment {
  const dir = mkdtempSync(join(tmpdir(), "sb-bench-"));
  const config = parseConfig({
    ...extra,
    redis: { url: redisUrl, prefix: `bench${randomUUID().slice(0, 8)}` },
    storage: { dir, ...(opts.fsync ? { fsync: opts.fsync } : {}) },
    workers: { ...(extra.workers ?? {}), ...(opts.concurrency ? { concurrency: opts.concurrency } : {}) },
    gateway: { port: 0 },
    session: { reset: { mode: "daily", atHour: (new Date().getHours() + 12) % 24 }, ...(extra.session ?? {}) },
  });
  return { config, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function startSwitchboard(
  config: Config,
  parts: { gateway: boolean; workers: boolean },
): Promise<SwitchboardSystem> {
  return await startSystem(config, { gateway: parts.gateway, workers: parts.workers ? {} : false, logger: false });
}

export interface BenchSession {
  key: string;
  agentId: string;
  sessionId: string;
}

/** Sessions `agent:<agentId>:<name>` created up front, as a chat would have created them. */
export async function createSessions(svc: Services, agentId: string, names: string[]): Promise<BenchSession[]> {
  return await Promise.all(
    names.map(async (name) => {
      const key = `agent:${agentId}:${name}`;
      const e = await svc.sessions.upsert(key, { agentId, kind: "other" }, { sessionId: randomUUID() });
      return { key, agentId, sessionId: e.sessionId };
    }),
  );
}

/** One user turn through the real enqueue path (inbox + drain wake-up); resolves to its runId. */
export async function enqueueUserTurn(svc: Services, s: BenchSession, text: string): Promise<string> {
  const turn = await enqueueTurn(svc, {
    sessionKey: s.key,
    agentId: s.agentId,
    sessionId: s.sessionId,
    text,
    step: "turn",
    provenance: "user",
  });
  return turn.runId;
}

/**
 * The runId a run-done notification is about: its payload up to the first newline (a finish
 * publishes `<runId>\n<record>`, other writers the runId alone); tolerant of a JSON record.
 */
function runIdOf(message: string): string {
  if (message.startsWith("{")) {
    try {
      const parsed = JSON.parse(message) as { runId?: unknown };
      if (typeof parsed.runId === "string") return parsed.runId;
    } catch {
      // not JSON after all: the payload is the id
    }
  }
  const nl = message.indexOf("\n");
  return nl < 0 ? message : message.slice(0, nl);
}

/**
 * Finished runs of a deployment, observed as `agent.wait` observes them (the run-done
 * pub/sub), with the time each was seen. A subscriber sends no commands while listening, so
 * watching costs the measured system nothing.
 */
export class RunDoneWatcher {
  private finished = new Map<string, number>();
  private waiters: { n: number; resolve: () => void }[] = [];

  private constructor(private readonly sub: Redis) {}

  static async start(config: Config): Promise<RunDoneWatcher> {
    const sub = roundTrips.exclude(benchClient(config.redis.url));
    const w = new RunDoneWatcher(sub);
    const channel = new RedisKeys(config.redis.prefix).runDoneChannel();
    sub.on("message", (ch: string, msg: string) => {
      if (ch === channel) w.seen(runIdOf(msg));
    });
    await sub.subscribe(channel);
    return w;
  }

  private seen(runId: string): void {
    if (this.finished.has(runId)) return;
    this.finished.set(runId, Date.now());
    this.waiters = this.waiters.filter((w) => {
      if (this.finished.size < w.n) return true;
      w.resolve();
      return false;
    });
  }

  /** Forget what was seen (the next round counts from zero). */
  reset(): void {
    this.finished = new Map();
  }

  get count(): number {
    return this.finished.size;
  }

  /** Finish times (ms since epoch) of the runs seen since the last reset. */
  times(): number[] {
    return [...this.finished.values()];
  }

  async waitFor(n: number, timeoutMs: number, what = "runs"): Promise<void> {
    if (this.finished.size >= n) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.waiters.push({ n, resolve })),
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`only ${this.finished.size} of ${n} ${what} finished within ${timeoutMs} ms`)),
            timeoutMs,
          )),
      ),
    ]).finally(() => clearTimeout(timer));
  }

  close(): void {
    this.sub.disconnect();
  }
}

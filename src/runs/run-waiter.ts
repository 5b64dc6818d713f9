/**
 * `agent.wait`: wait for a run to reach a terminal state, answered from Redis by any process.
 * One subscriber connection per process listens on the run-done channel; each wait registers
 * locally and then reads the record, so a run that finished before the wait answers at once
 * and one that finishes after is caught by the notification (subscribe-then-check: nothing is
 * missed). Notifications lost while disconnected are covered by re-checking on reconnect and
 * by a slow poll.
 *
 * A gateway shutting down hands its waits over (`handOver`): each answers at once as a
 * timeout with the run's current record and the reason, so the client asks again on another
 * gateway. Only the waits of requests: a turn running in the same process (`switchboard start`)
 * waits on as usual (`handOver: false`), its worker's grace decides how long.
 *
 * The finished records published in the last seconds are kept as they came (bounded, not
 * decoded), so a wait for a run that finished just before it (the usual `agent` then `agent.wait`
 * of a quick turn) is answered without a read. The finish is a record's last change (run-finish.lua
 * writes only a run that is not terminal yet), so the fields a wait answers are those a read gives.
 */
import type { RedisClient } from "../storage/redis-client.js";
import { keepSubscribed } from "../queues/redis-connections.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { notificationRecord, type RunRecords, type RunRecord } from "./run-records.js";
import { isTerminal } from "./turn.js";

type Waiter = (rec: RunRecord) => void;

export interface WaitResult {
  record: RunRecord | null;
  timedOut: boolean;
  /** Answered early by `handOver`: its reason (the run goes on; ask another gateway). */
  handedOver?: string;
}

export interface WaitOptions {
  /**
   * The caller stopped waiting (an MCP client cancelled its call). The wait answers at once as a
   * timeout with the record last seen (null when none was read yet) and lets go of its timer and
   * its place on the subscription; the run itself is not touched.
   */
  signal?: AbortSignal;
  /**
   * false: the wait of a turn running in this process (sessions_send from inside a turn), not of a
   * request to this gateway. A gateway closing hands over only its requests' waits: answering a
   * turn's wait early would end a turn the worker may still finish within its grace with a made-up
   * timeout. Default true.
   */
  handOver?: boolean;
}

/** How long, how many and how many characters of finished records are kept for waits that come late. */
const RECENT_MS = 30_000;
const RECENT_MAX = 4096;
const RECENT_MAX_CHARS = 4 * 1024 * 1024;

export class RunWaiter {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly ready: Promise<void>;
  private poll: NodeJS.Timeout | undefined;
  /** Pending waits, each answerable early with "timed out"; true: handed over by `handOver`. */
  private readonly expirers = new Map<(reason: string) => void, boolean>();
  /** Set by `handOver`: why waits that may be handed over are answered at once. */
  private handOverReason: string | undefined;
  /** runId → [when it came (ms), the finished record's JSON], oldest first. */
  private readonly recent = new Map<string, [number, string]>();
  private recentChars = 0;

  constructor(
    subscriber: RedisClient,
    keys: RedisKeys,
    private readonly records: RunRecords,
    pollMs = 2000,
  ) {
    const channel = keys.runDoneChannel();
    subscriber.on("message", (ch: string, message: string) => {
      if (ch !== channel) return;
      // `<runId>` alone, or `<runId>\n<record>`: the finished record itself (its field, value
      // pairs as JSON, see run-finish.lua), no read back.
      const nl = message.indexOf("\n");
      if (nl < 0) return void this.check(message);
      const runId = message.slice(0, nl);
      const json = message.slice(nl + 1);
      this.remember(runId, json);
      // Every run's finish comes here; only one somebody waits for here is worth decoding.
      if (!this.waiters.get(runId)?.size) return;
      const rec = notificationRecord(json);
      if (rec && isTerminal(rec.status)) this.deliver(runId, rec);
      else void this.check(runId);
    });
    // Subscribed again after a reconnect; anything published meanwhile is re-read then.
    this.ready = keepSubscribed(subscriber, channel, () => this.recheckAll());
    // Closed before SUBSCRIBE answered (a short CLI command): not an unhandled rejection.
    this.ready.catch(() => {});
    this.poll = setInterval(() => this.recheckAll(), pollMs);
    this.poll.unref();
  }

  /** Waits registered and not answered yet (each holds a place on the run-done subscription and a timer). */
  get pendingWaits(): number {
    return this.expirers.size;
  }

  /** Resolves with the terminal record, or with the current (non-terminal) record on timeout. */
  async wait(runId: string, timeoutMs: number, opts: WaitOptions = {}): Promise<WaitResult> {
    const { signal } = opts;
    const handOver = opts.handOver ?? true;
    const finished = this.recentlyFinished(runId);
    if (finished) return { record: finished, timedOut: false };
    if (signal?.aborted) return { record: null, timedOut: true };
    // The timeout holds even while the subscription is not up yet (Redis away at start).
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const subscribed = await Promise.race([
      this.ready.then(
        () => true,
        () => false,
      ),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), Math.max(0, timeoutMs));
        onAbort = () => r(false);
        signal?.addEventListener("abort", onAbort, { once: true });
      }),
    ]);
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
    if (signal?.aborted) return { record: null, timedOut: true };
    if (!subscribed) {
      // A read error propagates: "no record" would tell the caller the run does not exist.
      const rec = await this.records.get(runId);
      return { record: rec, timedOut: !(rec && isTerminal(rec.status)) };
    }
    // Registered first, then one read: a run that finished already answers from that read, one
    // that finishes later is caught by the notification. Every accepted run has a record before
    // its runId is handed out, so no record means an unknown run.
    return await new Promise((resolve, reject) => {
      let done = false;
      let seen: RunRecord | null = null;
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        if (done) return false;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", cancel);
        this.expirers.delete(expire);
        this.waiters.get(runId)?.delete(waiter);
        if (this.waiters.get(runId)?.size === 0) this.waiters.delete(runId);
        return true;
      };
      const finish = (record: RunRecord | null, timedOut: boolean, handedOver?: string) => {
        if (settle())
          resolve(timedOut && handedOver !== undefined ? { record, timedOut, handedOver } : { record, timedOut });
      };
      // Redis away when asked again: an honest timeout with the status last seen, or, when the
      // run was never read, the error (no record would tell the caller the run does not exist).
      const fail = (err: unknown) => (seen ? finish(seen, true) : settle() && reject(err));
      const reread = (handedOver?: string) =>
        this.records.get(runId).then((rec) => finish(rec, !(rec && isTerminal(rec.status)), handedOver), fail);
      const waiter: Waiter = (rec) => finish(rec, false);
      const expire = (handedOver?: string) => void reread(handedOver);
      // No read on a cancel: nobody is left to answer, only the wait's resources to release.
      const cancel = () => finish(seen, true);
      signal?.addEventListener("abort", cancel, { once: true });
      this.expirers.set(expire, handOver);
      timer = setTimeout(() => expire(), Math.max(0, timeoutMs));
      let set = this.waiters.get(runId);
      if (!set) this.waiters.set(runId, (set = new Set()));
      set.add(waiter);
      this.records.get(runId).then(
        (rec) => {
          if (!rec) return finish(null, false);
          seen = rec;
          if (isTerminal(rec.status)) return finish(rec, false);
          if (handOver && this.handOverReason !== undefined) return finish(rec, true, this.handOverReason);
        },
        (err: unknown) => {
          if (settle()) reject(err);
        },
      );
    });
  }

  private remember(runId: string, json: string): void {
    const now = Date.now();
    const had = this.recent.get(runId);
    if (had) {
      this.recent.delete(runId);
      this.recentChars -= had[1].length;
    }
    this.recent.set(runId, [now, json]);
    this.recentChars += json.length;
    for (const [id, [at, old]] of this.recent) {
      if (this.recent.size <= RECENT_MAX && this.recentChars <= RECENT_MAX_CHARS && now - at <= RECENT_MS) break;
      this.recent.delete(id);
      this.recentChars -= old.length;
    }
  }

  /** The record of a run whose finish was published here in the last seconds, if any. */
  private recentlyFinished(runId: string): RunRecord | null {
    const hit = this.recent.get(runId);
    if (!hit || Date.now() - hit[0] > RECENT_MS) return null;
    const rec = notificationRecord(hit[1]);
    return rec && isTerminal(rec.status) ? rec : null;
  }

  private async check(runId: string): Promise<void> {
    const set = this.waiters.get(runId);
    if (!set || set.size === 0) return;
    const rec = await this.records.get(runId).catch(() => null);
    if (rec && isTerminal(rec.status)) this.deliver(runId, rec);
  }

  private deliver(runId: string, rec: RunRecord): void {
    const set = this.waiters.get(runId);
    if (set) for (const w of [...set]) w(rec);
  }

  private recheckAll(): void {
    for (const runId of this.waiters.keys()) void this.check(runId);
  }

  /**
   * Answer every pending wait that may be handed over now (a terminal run as finished, any other
   * as a timeout with its current record and `reason` as `handedOver`) and every later one at
   * once. Waits of turns (`handOver: false`) go on. Resolves when the handed ones are answered.
   */
  async handOver(reason: string): Promise<number> {
    this.handOverReason = reason;
    const pending = [...this.expirers].filter(([, handed]) => handed).map(([expire]) => expire);
    for (const expire of pending) expire(reason);
    const deadline = Date.now() + 2000;
    while (pending.some((e) => this.expirers.has(e)) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    return pending.length;
  }

  async close(): Promise<void> {
    if (this.poll) clearInterval(this.poll);
    this.poll = undefined;
  }
}

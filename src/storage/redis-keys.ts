/**
 * Every Redis key Switchboard owns, in one place. All keys share the `{prefix}` hash tag so a
 * Lua script touching an entry and its indexes stays within one Redis Cluster slot. BullMQ's
 * own keys use the same tag as their `prefix` (see queues), never ioredis `keyPrefix`.
 */
export class RedisKeys {
  /** `{sb}`: the hash-tagged base every key starts with. */
  readonly base: string;

  constructor(prefix: string) {
    this.base = `{${prefix}}`;
  }

  /** BullMQ's `prefix` option: queues live at `{sb}:q:<queue>:…`. */
  get bullPrefix(): string {
    return `${this.base}:q`;
  }

  session(sessionKey: string): string {
    return `${this.base}:s:${sessionKey}`;
  }
  updatedIndex(): string {
    return `${this.base}:idx:updated`;
  }
  agentIndex(agentId: string): string {
    return `${this.base}:idx:agent:${agentId}`;
  }
  kindIndex(kind: string): string {
    return `${this.base}:idx:kind:${kind}`;
  }
  sessionIdIndex(): string {
    return `${this.base}:idx:sid`;
  }
  labelIndex(agentId: string): string {
    return `${this.base}:idx:label:${agentId}`;
  }
  childrenIndex(parentKey: string): string {
    return `${this.base}:idx:children:${parentKey}`;
  }
  /** Sessions by the instant they go stale (daily/idle): the sweep reads only what is due. */
  staleIndex(): string {
    return `${this.base}:idx:stale`;
  }

  // ---- runs: per-session inbox, in-flight turn, lease with fencing, run records ----
  inbox(sessionKey: string): string {
    return `${this.base}:inbox:${sessionKey}`;
  }
  inflight(sessionKey: string): string {
    return `${this.base}:inflight:${sessionKey}`;
  }
  /**
   * The UTF-8 bytes of the turns in the session's inbox (gateway.limits.maxQueuedBytes): kept by
   * every script that changes the inbox, set afresh by a push into an empty one (push-turn.lua).
   */
  inboxBytes(sessionKey: string): string {
    return `${this.base}:inbox-bytes:${sessionKey}`;
  }
  /** Holds the fencing token of the worker that currently owns the session. */
  lease(sessionKey: string): string {
    return `${this.base}:lease:${sessionKey}`;
  }
  /** The nonce of the lease's last take, so a take sent twice is answered once (take-lease.lua). */
  leaseTake(sessionKey: string): string {
    return `${this.base}:lease-take:${sessionKey}`;
  }
  /** Monotonic counter: every new lease gets a larger token than any before it. */
  fence(sessionKey: string): string {
    return `${this.base}:fence:${sessionKey}`;
  }
  /**
   * Sessions a push found idle, until a drainer has them (zset member `<runId>|<key>`, score ms):
   * until their drain job takes the turn, or until their ready-list drain ends.
   */
  pendingWakes(): string {
    return `${this.base}:wakes:pending`;
  }
  /**
   * Sessions that may have work (zset member = session key, score = ms on Redis's clock): added by
   * a push into an idle session (push-turn.lua), never removed on the hot path; the maintenance
   * sweep drops a session found idle and re-arms one with turns and no drainer
   * (src/workers/stranded-sessions.ts).
   */
  workSessions(): string {
    return `${this.base}:work:sessions`;
  }
  /** Sessions readied by a push into an idle inbox, oldest first (list of pending-wake members). */
  readyList(): string {
    return `${this.base}:wakes:ready`;
  }
  run(runId: string): string {
    return `${this.base}:run:${runId}`;
  }
  /** Pub/sub: a run reached a terminal state (message = runId). */
  runDoneChannel(): string {
    return `${this.base}:ev:run-done`;
  }
  /** Pub/sub: abort the run of a session wherever it executes (message = JSON). */
  cancelChannel(): string {
    return `${this.base}:ev:cancel`;
  }
  /** Hash runId → dead letter (JSON): messages that could not be run, kept for replay. */
  deadLetters(): string {
    return `${this.base}:deadletters`;
  }
  /**
   * Zset runId → failedAt (ms) of the dead letters, written in the same step as the hash: listing pages through it
   * in order instead of reading the whole hash (src/runs/dead-letters.ts).
   */
  deadLetterIndex(): string {
    return `${this.base}:deadletters:by-failed-at`;
  }
  /**
   * Hash runId → "<ms>\n<turn JSON>": turns `/stop` dropped whose continuation (announce,
   * agent-to-agent step) and reset archive are not queued yet (src/runs/stop.ts).
   */
  stoppedTurns(): string {
    return `${this.base}:stopped`;
  }
  /**
   * Zset stop id → ms of its last step: `/stop`s whose own list (`stopList`) still holds turns to
   * drop, so the maintenance sweep finishes one that died between its steps (src/runs/stop.ts).
   */
  stops(): string {
    return `${this.base}:stopping`;
  }
  /** The turns a `/stop` took from the inbox at its start and has not dropped yet (stop-queued.lua). */
  stopList(stopId: string): string {
    return `${this.base}:stopping:${stopId}`;
  }
  /**
   * Set by a `/stop`'s cut (its first step), with a TTL: a resent cut finds it and takes nothing,
   * not even an inbox filled after the stop (stop-queued.lua). Not under `stopping:`, which holds
   * only the lists of stops still going on.
   */
  stopCut(stopId: string): string {
    return `${this.base}:stop-cut:${stopId}`;
  }
  /**
   * Retired transcripts not archived yet (zset member `<kind>\n<agentId>\n<sessionId>\n<key>`,
   * score ms): recorded by the reset or delete itself, removed once archived, so a crash between
   * the two is found by the maintenance sweep (src/rotation/pending-archives.ts).
   */
  pendingArchives(): string {
    return `${this.base}:archives:pending`;
  }
  /**
   * Sub-agent runs ended or dropped without an announce whose requester is not released yet
   * (zset member `[runId, requesterKey, childKey]` as JSON, score ms on Redis's clock): recorded by
   * the end itself (subagent-unqueued.lua), removed once the release is done, so the maintenance
   * sweep releases what a crash between the two left owed (src/subagents/unqueued.ts).
   */
  subagentReleaseOwed(): string {
    return `${this.base}:sa:release-owed`;
  }
  /**
   * Sub-agent runs registered (zset runId by registration time, ms on Redis's clock; entries older
   * than the records' TTL are removed by the next registration): written with each registration
   * (subagent-register.lua, subagent-replace.lua), read by the maintenance sweep, which drops
   * the ones whose turn was never queued past the grace period and forgets the rest
   * (src/subagents/unqueued.ts, `dropCutOffRuns`).
   */
  subagentRegistered(): string {
    return `${this.base}:sa:registered`;
  }
  /** Set (with a TTL) while workers see transcript storage refusing writes; /readyz reads it. */
  storageFault(): string {
    return `${this.base}:health:storage`;
  }
  /** Hash of deployment-wide counters (storage faults, poisoned turns, …) for /metrics. */
  stats(): string {
    return `${this.base}:stats`;
  }
  // ---- outbound deliveries ----
  delivery(id: string): string {
    return `${this.base}:dlv:${id}`;
  }
  deliveryIndex(): string {
    return `${this.base}:idx:dlv`;
  }
  deliveriesBySession(sessionKey: string): string {
    return `${this.base}:idx:dlv:s:${sessionKey}`;
  }
  deliveriesByChannel(channel: string): string {
    return `${this.base}:idx:dlv:c:${channel}`;
  }
  /** A chat's deliveries not yet settled, in the order they were queued (zset id -> sequence). */
  deliveryLane(laneId: string): string {
    return `${this.base}:dlane:${laneId}`;
  }
  /** The sequence the delivery lanes are ordered by (one counter per deployment). */
  deliveryLaneSeq(): string {
    return `${this.base}:dlane-seq`;
  }
  /** Set when a sessions_send caller stopped waiting: the reply must reach it by the flow. */
  a2aLate(runId: string): string {
    return `${this.base}:a2a:late:${runId}`;
  }
  // ---- transcripts, per file stem (the sessionId, or `<sessionId>-topic-<topic>`) ----
  /** The writer lock of the locked store (token, with a TTL). Same slot as the lease: the fence check is one script. */
  transcriptLock(stem: string): string {
    return `${this.base}:txlock:${stem}`;
  }
  /** Waiters for the transcript lock, oldest first (zset token -> arrival ms). */
  transcriptLockQueue(stem: string): string {
    return `${this.base}:txq:${stem}`;
  }
  /** The lock waiters' last poll (zset token -> ms): a silent waiter is dropped from the queue. */
  transcriptLockHeartbeats(stem: string): string {
    return `${this.base}:txqhb:${stem}`;
  }
  /** Hash `size`, `file`: how many bytes of which transcript file are indexed. */
  transcriptIndex(stem: string): string {
    return `${this.base}:txidx:${stem}`;
  }
  /** Set of the indexed entry ids of a transcript (appends are idempotent on them). */
  transcriptIds(stem: string): string {
    return `${this.base}:txids:${stem}`;
  }
}

/**
 * The Redis-wide registry of running Switchboard processes (deployment/process-registry.ts).
 * Outside every prefix on purpose: a process must see the processes of other prefixes that share
 * its Redis. One hash tag, so both keys sit in one Redis Cluster slot for the registry's scripts.
 */
export const REGISTRY_KEYS = {
  /** Sorted set: process id → expiry (ms on Redis's clock). */
  expiries: "switchboard:{registry}:expiries",
  /** Hash: process id → record JSON. */
  records: "switchboard:{registry}:records",
} as const;

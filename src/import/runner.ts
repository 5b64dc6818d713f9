/**
 * `switchboard import openclaw`: reads both store generations, maps and de-duplicates the
 * rows, then writes sessions (SessionStore.upsert) and transcripts (TranscriptStore.append,
 * keeping the original line ids). Idempotent: a row whose stored copy already matches is not
 * written, and lines whose ids the transcript holds are not appended, so a second run over an
 * unchanged state dir changes nothing. What it leaves out is reported with the reason.
 *
 * A session Switchboard has moved on with since OpenClaw last did (its `updatedAt` is newer) is
 * kept as it is, transcript included: OpenClaw's later lines would otherwise land after
 * Switchboard's newer turns. Those lines are counted and named in the report instead.
 */
import type { RedisClient } from "../storage/redis-client.js";
import { defaultAgentId } from "../config/agents.js";
import type { Config } from "../config/schema.js";
import { LabelConflictError, SwitchboardError } from "../errors/index.js";
import type { SessionEntry } from "../session/session-entry.js";
import { topicOpt } from "../session/transcript-topic.js";
import type { SessionStore } from "../storage/session-store.js";
import type { TranscriptStore } from "../transcript/transcript-store.js";
import type { TranscriptEntry } from "../history/transcript-types.js";
import { scanJsonStores } from "./json-store.js";
import {
  changedFields,
  dedupeSessions,
  mapOpenClawEntry,
  transcriptLineToEntry,
  type LineSkip,
  type MappedSession,
} from "./openclaw-entry.js";
import { scanSqliteStores } from "./sqlite-store.js";
import { redactTranscriptEntries } from "../history/redact-transcript.js";
import type { RawTranscriptLine, Skip, SkipReason, StoreScan } from "./types.js";

export interface ImportTargets {
  config: Config;
  redis: RedisClient;
  sessions: SessionStore;
  transcripts: TranscriptStore;
}

export interface ImportOptions {
  stateDir: string;
  /** Read and compare only: nothing is written. */
  dryRun?: boolean;
  /** Sessions written at once (default 8). */
  concurrency?: number;
  /**
   * Called while the stores are read (phase "scan"), once before the first session, after each
   * batch of transcript lines and after each session (phase "import"). Often: throttle it.
   */
  onProgress?: (p: ImportProgress) => void;
  /** Stops the import between two batches of lines (Ctrl-C): it rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface ImportProgress {
  /** "scan": the stores are being read (`found` rows so far); "import": sessions are being written. */
  phase: "scan" | "import";
  /** Session rows read from the stores so far. */
  found: number;
  /** Sessions finished, of `total` (0 of 0 while scanning). */
  done: number;
  total: number;
  /** Transcript lines handled so far (written, already present or skipped). */
  lines: number;
  counts: ImportReport["sessions"];
}

export interface ImportReport {
  stateDir: string;
  dryRun: boolean;
  stores: { json: string[]; sqlite: string[] };
  sessions: {
    /** Rows found in all stores. */
    found: number;
    created: number;
    updated: number;
    unchanged: number;
    /**
     * The Switchboard copy is newer than the import: its entry and its transcript were left alone
     * (`transcripts.linesNotImported` counts the OpenClaw lines it lacks).
     */
    keptNewer: number;
    skipped: number;
  };
  transcripts: {
    /** Sessions whose transcript was read. */
    read: number;
    linesWritten: number;
    /** Lines already in the Switchboard transcript (same id). */
    linesPresent: number;
    /** Lines of kept sessions (`sessions.keptNewer`) their Switchboard transcript lacks: not appended. */
    linesNotImported: number;
    /** Lines that could not be imported, per reason. */
    linesSkipped: Record<LineSkip, number>;
  };
  /** Every row, file or store left out, with the reason. */
  skipped: Skip[];
  /** Things imported with a change (a label dropped for a conflict…) or not at all (lines of a kept session). */
  warnings: string[];
}

/** Skips that are about files or whole stores, not about one session row. */
const NOT_SESSION_SKIPS = new Set<SkipReason>([
  "orphan_transcript",
  "unreadable_store",
  "bad_agent_dir",
  "unreadable_transcript",
]);

/** Lines per append call: bounds memory and the size of one Redis membership check. */
const APPEND_BATCH = 1000;

export async function importOpenClaw(targets: ImportTargets, opts: ImportOptions): Promise<ImportReport> {
  const { config } = targets;
  const dryRun = opts.dryRun ?? false;
  const { signal } = opts;
  const scans: StoreScan[] = [];
  const zero = { found: 0, created: 0, updated: 0, unchanged: 0, keptNewer: 0, skipped: 0 };
  const scanning = (found: number) =>
    opts.onProgress?.({ phase: "scan", found, done: 0, total: 0, lines: 0, counts: zero });
  try {
    const json = await scanJsonStores(opts.stateDir, {
      defaultAgentId: defaultAgentId(config),
      onProgress: scanning,
      ...(signal ? { signal } : {}),
    });
    scans.push(json);
    const sqlite = await scanSqliteStores(opts.stateDir, {
      onProgress: (rows) => scanning(json.sessions.length + rows),
      ...(signal ? { signal } : {}),
    });
    scans.push(sqlite);
    signal?.throwIfAborted();

    const report: ImportReport = {
      stateDir: opts.stateDir,
      dryRun,
      stores: { json: json.stores, sqlite: sqlite.stores },
      sessions: {
        found: json.sessions.length + sqlite.sessions.length,
        created: 0,
        updated: 0,
        unchanged: 0,
        keptNewer: 0,
        skipped: 0,
      },
      transcripts: {
        read: 0,
        linesWritten: 0,
        linesPresent: 0,
        linesNotImported: 0,
        linesSkipped: { unparseable: 0, not_an_entry: 0, unreadable: 0 },
      },
      skipped: [...json.skips, ...sqlite.skips],
      warnings: [],
    };

    const mapped: MappedSession[] = [];
    for (const src of [...json.sessions, ...sqlite.sessions]) {
      const r = mapOpenClawEntry(config, src);
      if (r.ok) mapped.push(r.session);
      else report.skipped.push(r.skip);
    }
    const { kept, skips } = dedupeSessions(mapped);
    report.skipped.push(...skips);

    const total = kept.length;
    let done = 0;
    const t = report.transcripts;
    const progress = () =>
      opts.onProgress?.({
        phase: "import",
        found: report.sessions.found,
        done,
        total,
        lines:
          t.linesWritten +
          t.linesPresent +
          t.linesNotImported +
          t.linesSkipped.unparseable +
          t.linesSkipped.not_an_entry +
          t.linesSkipped.unreadable,
        counts: report.sessions,
      });
    progress();
    const run: Run = { targets, report, dryRun, progress, ...(signal ? { signal } : {}) };
    await runPool(kept, opts.concurrency ?? 8, async (m) => {
      signal?.throwIfAborted();
      await importOne(run, m);
      done++;
      progress();
    });
    report.sessions.skipped = report.skipped.filter((s) => !NOT_SESSION_SKIPS.has(s.reason)).length;
    return report;
  } finally {
    for (const s of scans) await s.close();
  }
}

/** What every session of one import shares. */
interface Run {
  targets: ImportTargets;
  report: ImportReport;
  dryRun: boolean;
  progress: () => void;
  signal?: AbortSignal;
}

/**
 * Runs `fn` over `items`, `concurrency` at a time. The first failure stops the others from
 * taking more items, and is thrown only once every one of them has stopped: the caller closes
 * the stores they read from, which must not happen under a session still being read.
 */
async function runPool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      try {
        await fn(items[next++]!);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(
    Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker),
  );
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failure) throw failure.reason;
}

async function importOne(run: Run, m: MappedSession): Promise<void> {
  const { targets, report, dryRun } = run;
  const { sessions } = targets;
  const existing = await sessions.get(m.key);
  if (existing && existing.sessionId !== m.sessionId) {
    report.skipped.push({
      reason: "conflict",
      source: m.source.store,
      key: m.key,
      detail: `Switchboard already has ${m.key} with sessionId ${existing.sessionId} (import has ${m.sessionId})`,
    });
    return;
  }
  const holder = existing ? m.key : await sessions.keyForSessionId(m.sessionId);
  if (holder && holder !== m.key) {
    report.skipped.push({
      reason: "conflict",
      source: m.source.store,
      key: m.key,
      detail: `sessionId ${m.sessionId} already belongs to ${holder} in Switchboard`,
    });
    return;
  }

  const outcome = await writeEntry(targets, m, existing, report, dryRun);
  if (outcome === "skipped" || !m.source.transcript) return;
  if (outcome === "kept") {
    // Switchboard's turns are newer than anything OpenClaw has for this session: appending its
    // lines would put them after those turns. Count what stays out, and say so.
    const missing = await importTranscript(run, m, "kept");
    if (missing > 0)
      report.warnings.push(
        `${m.key}: ${missing} OpenClaw transcript line(s) not imported: the session is newer in ` +
          "Switchboard, and they would come after its newer turns",
      );
    return;
  }
  await importTranscript(run, m, dryRun ? "count" : "write");
}

/** Creates or updates the entry; "kept" when Switchboard's is newer, "skipped" for a conflict. */
async function writeEntry(
  targets: ImportTargets,
  m: MappedSession,
  existing: SessionEntry | null,
  report: ImportReport,
  dryRun: boolean,
): Promise<"written" | "kept" | "skipped"> {
  if (existing) {
    const changes = changedFields(existing as unknown as Record<string, unknown>, m.patch);
    // A label another session holds was dropped by an earlier run (labels are unique per agent):
    // it is not a change to make again, or every run would rewrite this entry for nothing.
    if (changes.label !== undefined && existing.label === undefined && typeof changes.label === "string") {
      const holder = await targets.sessions.keyForLabel(m.ident.agentId, changes.label);
      if (holder !== null && holder !== m.key) delete changes.label;
    }
    if (Object.keys(changes).length === 0) {
      report.sessions.unchanged++;
      return "written";
    }
    if (existing.updatedAt > m.updatedAt) {
      report.sessions.keptNewer++;
      return "kept";
    }
    if (!dryRun) {
      // `now` = the row's own activity time: an import is not activity in Switchboard.
      await upsertKeepingLabel(targets, m, changes, "update", report);
    }
    report.sessions.updated++;
    return "written";
  }
  if (!dryRun) {
    try {
      await upsertKeepingLabel(targets, m, m.patch, "create", report);
    } catch (err) {
      if (err instanceof SwitchboardError && err.code === "session_exists") {
        report.skipped.push({
          reason: "conflict",
          source: m.source.store,
          key: m.key,
          detail: "created in Switchboard while importing",
        });
        return "skipped";
      }
      if (err instanceof SwitchboardError && err.code === "lineage_immutable") {
        report.skipped.push({ reason: "conflict", source: m.source.store, key: m.key, detail: err.message });
        return "skipped";
      }
      throw err;
    }
  }
  report.sessions.created++;
  return "written";
}

async function upsertKeepingLabel(
  targets: ImportTargets,
  m: MappedSession,
  patch: MappedSession["patch"],
  mode: "create" | "update",
  report: ImportReport,
): Promise<void> {
  const opts = {
    mode,
    activity: "preserve" as const,
    now: m.updatedAt,
    expectSessionId: mode === "update" ? m.sessionId : undefined,
  };
  try {
    await targets.sessions.upsert(m.key, m.ident, patch, stripUndefined(opts));
  } catch (err) {
    // Labels are unique per agent in Switchboard; OpenClaw did not always enforce that.
    if (!(err instanceof LabelConflictError) || patch.label === undefined) throw err;
    const { label: _dropped, ...rest } = patch;
    await targets.sessions.upsert(m.key, m.ident, rest, stripUndefined(opts));
    report.warnings.push(`${m.key}: label ${JSON.stringify(patch.label)} dropped (${err.message})`);
  }
}

function stripUndefined<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Reads the session's transcript and appends the lines Switchboard lacks ("write"), or only
 * counts them: as lines to write (a dry run, "count") or as lines left out ("kept"). Returns how
 * many it lacked.
 */
async function importTranscript(run: Run, m: MappedSession, mode: "write" | "count" | "kept"): Promise<number> {
  const { targets, report, signal } = run;
  let missing = 0;
  const source = m.source.transcript!;
  const { agentId } = m.ident;
  // The lines go to the file every live reader, writer and archiver derives from the session
  // key (a Telegram topic's `<sessionId>-topic-<n>.jsonl`), whatever the source file was called
  // (OpenClaw's SQLite store has no file name at all).
  const topic = topicOpt(m.key);
  let batch: TranscriptEntry[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    // Ctrl-C: stop between two batches, never inside an append.
    signal?.throwIfAborted();
    if (mode !== "write") {
      // Not the index alone: it expires 15 minutes after the last append (transcript-store.ts).
      const flags = await targets.transcripts.present(
        agentId,
        m.sessionId,
        batch.map((e) => e.id),
        topic,
      );
      const present = flags.filter(Boolean).length;
      missing += flags.length - present;
      report.transcripts.linesPresent += present;
      if (mode === "kept") report.transcripts.linesNotImported += flags.length - present;
      else report.transcripts.linesWritten += flags.length - present;
    } else {
      // Stored as a turn's lines are: credentials masked unless transcripts.redactSecrets is off.
      const lines = redactTranscriptEntries(batch, targets.config.transcripts.redactSecrets);
      const r = await targets.transcripts.append(agentId, m.sessionId, lines, topic);
      report.transcripts.linesWritten += r.written;
      report.transcripts.linesPresent += r.skipped;
      missing += r.written;
    }
    batch = [];
    // One session can hold a million lines: progress is per batch, not per session.
    run.progress();
  };
  // Only failures to READ the source are a skip; a failing write (Redis, storage) stops the run.
  const lines = source.lines()[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<RawTranscriptLine>;
    try {
      next = await lines.next();
    } catch (err) {
      report.skipped.push({
        reason: "unreadable_transcript",
        source: source.describe,
        key: m.key,
        detail: (err as Error).message,
      });
      await flush();
      return missing;
    }
    if (next.done) break;
    const r = transcriptLineToEntry(m.sessionId, next.value);
    if (r.kind === "skip") report.transcripts.linesSkipped[r.why]++;
    if (r.kind !== "entry") continue;
    batch.push(r.entry);
    if (batch.length >= APPEND_BATCH) await flush();
  }
  await flush();
  report.transcripts.read++;
  return missing;
}

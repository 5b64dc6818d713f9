/**
 * `switchboard import openclaw`: reads both store generations, maps and de-duplicates the
 * rows, then writes sessions (SessionStore.upsert) and transcripts (TranscriptStore.append,
 * keeping the original line ids). Idempotent: a row whose stored copy already matches is not
 * written, and lines whose ids the transcript holds are not appended, so a second run over an
 * unchanged state dir changes nothing. What it leaves out is reported with the reason.
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
  /** Called after each session (done of total) and once before the first one. */
  onProgress?: (p: ImportProgress) => void;
}

export interface ImportProgress {
  done: number;
  total: number;
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
    /** The Switchboard copy is newer than the import: its entry was left alone. */
    keptNewer: number;
    skipped: number;
  };
  transcripts: {
    /** Sessions whose transcript was read. */
    read: number;
    linesWritten: number;
    /** Lines already in the Switchboard transcript (same id). */
    linesPresent: number;
    /** Lines that could not be imported, per reason. */
    linesSkipped: Record<LineSkip, number>;
  };
  /** Every row, file or store left out, with the reason. */
  skipped: Skip[];
  /** Things imported with a change (a label dropped for a conflict…). */
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
  const scans: StoreScan[] = [];
  try {
    const json = await scanJsonStores(opts.stateDir, { defaultAgentId: defaultAgentId(config) });
    scans.push(json);
    const sqlite = await scanSqliteStores(opts.stateDir);
    scans.push(sqlite);

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
    const progress = () => opts.onProgress?.({ done, total, counts: report.sessions });
    progress();
    await runPool(kept, opts.concurrency ?? 8, async (m) => {
      await importOne(targets, m, report, dryRun);
      done++;
      progress();
    });
    report.sessions.skipped = report.skipped.filter((s) => !NOT_SESSION_SKIPS.has(s.reason)).length;
    return report;
  } finally {
    for (const s of scans) await s.close();
  }
}

async function runPool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
}

async function importOne(
  targets: ImportTargets,
  m: MappedSession,
  report: ImportReport,
  dryRun: boolean,
): Promise<void> {
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

  if (!(await writeEntry(targets, m, existing, report, dryRun))) return;
  if (m.source.transcript) await importTranscript(targets, m, report, dryRun);
}

/** Creates or updates the entry. False when the session was skipped (nothing else to do). */
async function writeEntry(
  targets: ImportTargets,
  m: MappedSession,
  existing: SessionEntry | null,
  report: ImportReport,
  dryRun: boolean,
): Promise<boolean> {
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
      return true;
    }
    if (existing.updatedAt > m.updatedAt) {
      report.sessions.keptNewer++;
      return true;
    }
    if (!dryRun) {
      // `now` = the row's own activity time: an import is not activity in Switchboard.
      await upsertKeepingLabel(targets, m, changes, "update", report);
    }
    report.sessions.updated++;
    return true;
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
        return false;
      }
      if (err instanceof SwitchboardError && err.code === "lineage_immutable") {
        report.skipped.push({ reason: "conflict", source: m.source.store, key: m.key, detail: err.message });
        return false;
      }
      throw err;
    }
  }
  report.sessions.created++;
  return true;
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

async function importTranscript(
  targets: ImportTargets,
  m: MappedSession,
  report: ImportReport,
  dryRun: boolean,
): Promise<void> {
  const source = m.source.transcript!;
  const { agentId } = m.ident;
  // The lines go to the file every live reader, writer and archiver derives from the session
  // key (a Telegram topic's `<sessionId>-topic-<n>.jsonl`), whatever the source file was called
  // (OpenClaw's SQLite store has no file name at all).
  const topic = topicOpt(m.key);
  let batch: TranscriptEntry[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    if (dryRun) {
      // Not the index alone: it expires 15 minutes after the last append (transcript-store.ts).
      const flags = await targets.transcripts.present(
        agentId,
        m.sessionId,
        batch.map((e) => e.id),
        topic,
      );
      const present = flags.filter(Boolean).length;
      report.transcripts.linesPresent += present;
      report.transcripts.linesWritten += flags.length - present;
    } else {
      // Stored as a turn's lines are: credentials masked unless transcripts.redactSecrets is off.
      const lines = redactTranscriptEntries(batch, targets.config.transcripts.redactSecrets);
      const r = await targets.transcripts.append(agentId, m.sessionId, lines, topic);
      report.transcripts.linesWritten += r.written;
      report.transcripts.linesPresent += r.skipped;
    }
    batch = [];
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
      return;
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
}

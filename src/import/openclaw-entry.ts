/**
 * OpenClaw session rows and transcript lines → Switchboard sessions and transcript entries.
 * Pure: no I/O. Both store generations hold the same `SessionEntry` JSON (the SQLite store
 * keeps it in `session_nodes.entry_json`), including shapes older releases wrote; the rules
 * are in docs/concepts/openclaw-import.md.
 */
import { createHash } from "node:crypto";
import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors/index.js";
import { identOf } from "../session/session-ident.js";
import { canonicalSessionKey } from "../session/key-canonical.js";
import { normalizeChatType } from "../session/key-classify.js";
import { isSafeSessionId } from "../session/session-id.js";
import type { DeliveryContext, SessionEntryPatch, SessionKind, SessionOrigin } from "../session/session-entry.js";
import type { TranscriptEntry } from "../history/transcript-types.js";
import type { RawTranscriptLine, Skip, SourceSession, StoreGeneration } from "./types.js";

/** A source row that passed validation: what the runner writes. */
export interface MappedSession {
  key: string;
  ident: { agentId: string; kind: SessionKind };
  sessionId: string;
  updatedAt: number;
  /** Fields to store (never `key`, `rev`, `agentId`, `kind`: the store owns those). */
  patch: SessionEntryPatch;
  source: SourceSession;
}

export type MapResult = { ok: true; session: MappedSession } | { ok: false; skip: Skip };

const MAX_LABEL = 512;
const STATUSES = new Set(["running", "done", "failed", "killed", "timeout"]);
const ROLES = new Set(["orchestrator", "leaf"]);

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() !== "" ? v : undefined;
}

/** Thread ids are numbers on some channels (Telegram): Switchboard stores them as strings. */
function idStr(v: unknown): string | undefined {
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  return str(v);
}

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

function bool(v: unknown): boolean | undefined {
  return typeof v === "boolean" ? v : undefined;
}

/** Copies the defined values only: `undefined` must never reach the store as "remove". */
function compact<T extends Obj>(o: T): Partial<T> {
  const out: Obj = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as Partial<T>;
}

function deliveryContextOf(v: unknown): DeliveryContext | undefined {
  if (!isObj(v)) return undefined;
  const dc = compact({
    channel: str(v.channel),
    to: str(v.to),
    accountId: str(v.accountId),
    threadId: idStr(v.threadId),
  });
  return Object.keys(dc).length ? (dc as DeliveryContext) : undefined;
}

function originOf(v: unknown): SessionOrigin | undefined {
  if (!isObj(v)) return undefined;
  const o = compact({
    label: str(v.label),
    provider: str(v.provider),
    chatType: normalizeChatType(str(v.chatType)),
    from: str(v.from),
    to: str(v.to),
    accountId: str(v.accountId),
    threadId: idStr(v.threadId),
  });
  return Object.keys(o).length ? (o as SessionOrigin) : undefined;
}

/** A lineage key (spawnedBy, parentSessionKey) in canonical form, or undefined when unusable. */
function lineageKey(config: Config, v: unknown, agentId: string): string | undefined {
  const raw = str(v);
  if (!raw) return undefined;
  try {
    return canonicalSessionKey(config, raw, { agentId });
  } catch {
    return undefined;
  }
}

function skip(src: SourceSession, reason: Skip["reason"], detail: string, key?: string): MapResult {
  return { ok: false, skip: { reason, source: src.store, key: key ?? src.rawKey, detail } };
}

/**
 * Validates one row and maps it. Old field names are read as OpenClaw migrates them on load
 * (`provider` → `channel`, `lastProvider` → `lastChannel`); `direct` chat types become `dm`;
 * the key is canonicalised with the store's agent as owner of bare keys.
 */
export function mapOpenClawEntry(config: Config, src: SourceSession): MapResult {
  if (!isObj(src.entry)) return skip(src, "bad_entry", "entry is not a JSON object");
  const e = src.entry;

  let key: string;
  try {
    key = canonicalSessionKey(config, src.rawKey, { agentId: src.storeAgentId });
  } catch (err) {
    return skip(src, "bad_key", err instanceof SwitchboardError ? err.message : String(err));
  }

  const sessionId = str(e.sessionId) ?? src.fallbackSessionId;
  if (sessionId === undefined) return skip(src, "bad_entry", "entry has no sessionId", key);
  if (!isSafeSessionId(sessionId)) {
    return skip(
      src,
      "bad_session_id",
      `sessionId ${JSON.stringify(sessionId)} is not a safe file name ([a-z0-9][a-z0-9._-]{0,127})`,
      key,
    );
  }

  const ident = identOf(config, key);
  const updatedAt = num(e.updatedAt) ?? src.fallbackUpdatedAt;
  const createdAt = num(e.sessionStartedAt) ?? num(e.startedAt) ?? updatedAt;
  const label = str(e.label);
  const status = str(e.status);
  const role = str(e.subagentRole);
  const sendPolicy = str(e.sendPolicy)?.toLowerCase();
  const spawnDepth = num(e.spawnDepth);

  const patch = compact<SessionEntryPatch & Obj>({
    sessionId,
    updatedAt,
    createdAt: Math.min(createdAt, updatedAt),
    label: label && label.length <= MAX_LABEL ? label : undefined,
    displayName: str(e.displayName),
    subject: str(e.subject),
    chatType: normalizeChatType(str(e.chatType)),
    channel: str(e.channel) ?? str(e.provider),
    groupId: idStr(e.groupId),
    topicId: src.transcript?.topicId,
    origin: originOf(e.origin),
    deliveryContext: deliveryContextOf(e.deliveryContext),
    lastChannel: str(e.lastChannel) ?? str(e.lastProvider),
    lastTo: str(e.lastTo),
    lastAccountId: str(e.lastAccountId),
    lastThreadId: idStr(e.lastThreadId),
    spawnedBy: lineageKey(config, e.spawnedBy, ident.agentId),
    parentSessionKey: lineageKey(config, e.parentSessionKey, ident.agentId),
    spawnDepth: spawnDepth !== undefined && Number.isInteger(spawnDepth) && spawnDepth >= 0 ? spawnDepth : undefined,
    subagentRole: role && ROLES.has(role) ? (role as "orchestrator" | "leaf") : undefined,
    sendPolicy: sendPolicy === "allow" || sendPolicy === "deny" ? sendPolicy : undefined,
    model: str(e.model),
    modelOverride: str(e.modelOverride),
    providerOverride: str(e.providerOverride),
    thinkingLevel: str(e.thinkingLevel),
    verboseLevel: str(e.verboseLevel),
    systemSent: bool(e.systemSent),
    abortedLastRun: bool(e.abortedLastRun),
    status: status && STATUSES.has(status) ? (status as "running") : undefined,
    startedAt: num(e.startedAt),
    endedAt: num(e.endedAt),
    runtimeMs: num(e.runtimeMs),
    inputTokens: num(e.inputTokens),
    outputTokens: num(e.outputTokens),
    totalTokens: num(e.totalTokens),
    contextTokens: num(e.contextTokens),
  }) as SessionEntryPatch;

  return { ok: true, session: { key, ident, sessionId, updatedAt, patch, source: src } };
}

const GENERATION_RANK: Record<StoreGeneration, number> = { sqlite: 1, json: 0 };

/**
 * OpenClaw's own rule for rows that land on one key (case variants, `dm`/`direct`, legacy
 * bare keys, the same session in both generations): the freshest `updatedAt` wins; on a tie
 * the row already spelt canonically, then the newer store generation. Then one sessionId may
 * serve only one key (it names the transcript file), again freshest first.
 */
export function dedupeSessions(mapped: MappedSession[]): { kept: MappedSession[]; skips: Skip[] } {
  const better = (a: MappedSession, b: MappedSession): boolean => {
    if (a.updatedAt !== b.updatedAt) return a.updatedAt > b.updatedAt;
    const aCanon = a.source.rawKey === a.key;
    const bCanon = b.source.rawKey === b.key;
    if (aCanon !== bCanon) return aCanon;
    return GENERATION_RANK[a.source.generation] > GENERATION_RANK[b.source.generation];
  };
  const skips: Skip[] = [];
  const byKey = new Map<string, MappedSession>();
  for (const m of mapped) {
    const held = byKey.get(m.key);
    if (!held) {
      byKey.set(m.key, m);
      continue;
    }
    const [win, lose] = better(m, held) ? [m, held] : [held, m];
    byKey.set(m.key, win);
    skips.push({
      reason: "duplicate_key",
      source: lose.source.store,
      key: lose.source.rawKey,
      detail: `same session as ${win.source.rawKey} (${win.source.store}), which is newer or canonical`,
    });
  }
  const bySessionId = new Map<string, MappedSession>();
  for (const m of [...byKey.values()].sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0))) {
    const held = bySessionId.get(m.sessionId);
    if (held) {
      skips.push({
        reason: "duplicate_session_id",
        source: m.source.store,
        key: m.key,
        detail: `sessionId ${m.sessionId} already belongs to ${held.key}`,
      });
      continue;
    }
    bySessionId.set(m.sessionId, m);
  }
  return { kept: [...bySessionId.values()], skips };
}

/** Why a transcript line was not turned into an entry (counted per reason in the summary). */
export type LineSkip = "unparseable" | "not_an_entry" | "unreadable";

export type LineResult =
  | { kind: "entry"; entry: TranscriptEntry }
  | { kind: "header" }
  | { kind: "skip"; why: LineSkip; detail?: string };

/**
 * One transcript line → an entry keeping its original `id`. Lines without a string id (very
 * old transcripts) get an id derived from the session, position and content, so a second run
 * derives the same one and appends nothing. The session header is not an entry: Switchboard
 * writes its own.
 */
export function transcriptLineToEntry(sessionId: string, line: RawTranscriptLine): LineResult {
  if (line.text === undefined) return { kind: "skip", why: "unreadable", detail: line.unreadable ?? "no text" };
  const text = line.text.trim();
  if (text === "") return { kind: "skip", why: "unparseable", detail: "empty line" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: "skip", why: "unparseable", detail: `line ${line.position} is not JSON` };
  }
  if (!isObj(value) || typeof value.type !== "string" || value.type === "") {
    return { kind: "skip", why: "not_an_entry", detail: `line ${line.position} has no type` };
  }
  if (value.type === "session") return { kind: "header" };
  const entry = { ...value } as TranscriptEntry;
  if (typeof value.id !== "string" || value.id === "") entry.id = derivedLineId(sessionId, line.position, text);
  if (typeof entry.timestamp !== "string") {
    const ts = num((value.message as Obj | undefined)?.timestamp);
    // A number no date can hold (1e20) is the line's defect, not the import's: it gets the epoch.
    const date = new Date(ts ?? 0);
    entry.timestamp = (Number.isNaN(date.getTime()) ? new Date(0) : date).toISOString();
  }
  return { kind: "entry", entry };
}

export function derivedLineId(sessionId: string, position: number, text: string): string {
  return `import-${createHash("sha256").update(`${sessionId}\n${position}\n${text}`).digest("hex").slice(0, 16)}`;
}

/**
 * The patch fields whose stored value differs from the import. Compared with sorted object
 * keys: the store's Lua JSON encoder does not keep key order.
 */
export function changedFields(existing: Record<string, unknown>, patch: SessionEntryPatch): SessionEntryPatch {
  const out: Obj = {};
  for (const [k, v] of Object.entries(patch)) {
    if (stableJson(existing[k]) !== stableJson(v)) out[k] = v;
  }
  return out as SessionEntryPatch;
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (isObj(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(v[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "undefined";
}

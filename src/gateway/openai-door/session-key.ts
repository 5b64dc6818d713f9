/**
 * The session a chat-completions request talks to (OpenClaw's rules, docs/concepts/openai-door.md):
 *   1. a session-key header, when present, names it outright;
 *   2. else the OpenAI `user` field: `agent:<agentId>:openai-user:<user>`, the same session on
 *      every call with that user;
 *   3. else a new session per request: `agent:<agentId>:openai:<uuid>` (derived from the
 *      request's Idempotency-Key when it has one, so a retry reaches the same session).
 * Keys are canonical (lowercase) like every other key entering Switchboard.
 */
import { randomUUID } from "node:crypto";
import type { Config } from "../../config/schema.js";
import { canonicalSessionKey } from "../../session/key-canonical.js";
import { ValidationError } from "../../errors/index.js";
import { uuidFrom } from "../../runs/derived-id.js";

/** Header names that carry a session key; the first present wins. */
export const SESSION_KEY_HEADERS = ["x-switchboard-session-key", "x-openclaw-session-key"] as const;
/** Header names that pick the agent over the `model` field. */
export const AGENT_ID_HEADERS = ["x-switchboard-agent-id", "x-openclaw-agent-id"] as const;
/** Header names that carry a client's idempotency key for the turn; the first present wins. */
export const IDEMPOTENCY_KEY_HEADERS = ["idempotency-key", "x-switchboard-idempotency-key"] as const;

/**
 * The first of `names` present, as text. Node hands header values over as latin1 (one character
 * per byte); clients send UTF-8, so the bytes are read again as UTF-8: `café` stays `café`, the
 * key the same text names at the RPC door. Bytes that are not UTF-8 are refused (400) rather than
 * turned into another key.
 */
export function firstHeader(
  headers: Record<string, string | string[] | undefined>,
  names: readonly string[],
): string | undefined {
  for (const name of names) {
    const raw = headers[name];
    const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
    if (value) return utf8HeaderValue(name, value);
  }
  return undefined;
}

function utf8HeaderValue(name: string, latin1: string): string {
  // Plain ASCII reads the same either way (the common case: no copy).
  if (!/[^\p{ASCII}]/u.test(latin1)) return latin1;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(latin1, "latin1"));
  } catch {
    throw new ValidationError(`${name} header is not UTF-8`, [{ path: name, message: "not UTF-8" }]);
  }
}

export function doorSessionKey(
  config: Config,
  opts: {
    agentId: string;
    user?: string | undefined;
    headerKey?: string | undefined;
    idempotencyKey?: string | undefined;
    newId?: () => string;
  },
): string {
  if (opts.headerKey) return canonicalSessionKey(config, opts.headerKey, { agentId: opts.agentId });
  const user = opts.user?.trim();
  // A stateless call's retry must reach the same session to find its run: with an idempotency
  // key the new session's id is derived from it, not minted.
  const key = opts.idempotencyKey;
  const newId = opts.newId ?? (key ? () => uuidFrom(`openai-session\n${opts.agentId}\n${key}`) : randomUUID);
  const rest = user ? `openai-user:${user}` : `openai:${newId()}`;
  return canonicalSessionKey(config, `agent:${opts.agentId}:${rest}`);
}

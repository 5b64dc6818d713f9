/**
 * The session a chat-completions request talks to (OpenClaw's rules, docs/concepts/openai-door.md):
 *   1. a session-key header, when present, names it outright (refused when the request named
 *      another agent: the answer would name one agent while another ran);
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
import { defaultAgentId } from "../../config/agents.js";
import { isSubagentKey } from "../../session/key-classify.js";
import { agentIdFromSessionKey, parseAgentSessionKey, stripAgentPrefix } from "../../session/key-parse.js";
import { unsafeCharMessage } from "../../session/unsafe-chars.js";
import { DoorError } from "./errors.js";

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
  return firstHeaderNamed(headers, names)?.value;
}

/** firstHeader, with the name of the header it came in (for errors that name it). */
export function firstHeaderNamed(
  headers: Record<string, string | string[] | undefined>,
  names: readonly string[],
): { name: string; value: string } | undefined {
  for (const name of names) {
    const raw = headers[name];
    const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
    if (value) return { name, value: utf8HeaderValue(name, value) };
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

export interface DoorSessionKeyOptions {
  /** The agent the request picked (its `model`, or an agent-id header; else the default agent). */
  agentId: string;
  /**
   * What named that agent outright (`"model"`, or the agent-id header's name); undefined when the
   * request asked for none in particular (no `model`, or a default alias). A session-key header
   * whose agent is another is then refused: the completion would name one agent while another ran.
   */
  agentFrom?: string | undefined;
  user?: string | undefined;
  headerKey?: string | undefined;
  /** The header `headerKey` came in (named in errors); default the first of SESSION_KEY_HEADERS. */
  headerName?: string | undefined;
  idempotencyKey?: string | undefined;
  newId?: () => string;
}

export function doorSessionKey(config: Config, opts: DoorSessionKeyOptions): string {
  if (opts.headerKey) {
    const header = opts.headerName ?? SESSION_KEY_HEADERS[0];
    refuseUnsafe(header, opts.headerKey, header);
    const key = canonicalSessionKey(config, opts.headerKey, { agentId: opts.agentId });
    if (hasStraySubagentSegment(key)) {
      throw new DoorError(
        "invalid_session_key",
        `${header} ${key} has a 'subagent' segment after ${rootOf(key)}: only a sub-agent session ` +
          "(agent:<agentId>:subagent:<id>) has one",
        header,
      );
    }
    const owner = sessionAgentId(config, key);
    if (opts.agentFrom && owner !== opts.agentId) {
      throw new DoorError(
        "invalid_request",
        `${header} ${key} is a session of agent '${owner}', but ${opts.agentFrom} asks for agent ` +
          `'${opts.agentId}': send both for the same agent, ` +
          `or leave the agent to the key (no model, or "openclaw/default")`,
        opts.agentFrom,
      );
    }
    return key;
  }
  const user = opts.user?.trim();
  if (user) refuseUnsafe("user", opts.user!, "user");
  // A stateless call's retry must reach the same session to find its run: with an idempotency
  // key the new session's id is derived from it, not minted.
  const key = opts.idempotencyKey;
  const newId = opts.newId ?? (key ? () => uuidFrom(`openai-session\n${opts.agentId}\n${key}`) : randomUUID);
  const rest = user ? `openai-user:${user}` : `openai:${newId()}`;
  const built = canonicalSessionKey(config, `agent:${opts.agentId}:${rest}`);
  // `user: "x:subagent:y"` would make a key every part of Switchboard reads as a sub-agent's
  // (its queue, its spawn depth, its tool profile).
  if (user && hasStraySubagentSegment(built)) {
    throw new DoorError(
      "invalid_request",
      `user ${JSON.stringify(user)} holds a 'subagent' segment: the session ${built} would read as a sub-agent's; ` +
        "pick a user without ':subagent:'",
      "user",
    );
  }
  return built;
}

/** The agent that runs a session: the one its key names (the default agent for `global`). */
export function sessionAgentId(config: Config, sessionKey: string): string {
  return agentIdFromSessionKey(sessionKey, defaultAgentId(config));
}

/**
 * A key read as a sub-agent's (isSubagentKey: any `:subagent:` in it) that is not one: a
 * sub-agent session is `agent:<agentId>:subagent:<id>`, its `subagent` segment first.
 */
function hasStraySubagentSegment(key: string): boolean {
  return isSubagentKey(key) && !stripAgentPrefix(key).startsWith("subagent:");
}

function rootOf(key: string): string {
  const parsed = parseAgentSessionKey(key);
  return parsed ? `agent:${parsed.agentId}:${parsed.rest.split(":")[0]}` : key;
}

/** A control, bidi or invisible character, named with its index in the value as the client sent it. */
function refuseUnsafe(field: string, value: string, param: string): void {
  const message = unsafeCharMessage(field, value, { trimmed: true });
  if (message) throw new DoorError("invalid_request", message, param);
}

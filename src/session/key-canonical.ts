/**
 * One canonical spelling per session (docs/concepts/sessions.md, "Canonical keys: main aliases and legacy shapes").
 *
 * Every key that enters Switchboard (HTTP, CLI, tool input, imported stores) goes through
 * `canonicalSessionKey`, so two spellings of one conversation (`MAIN`, `agent:ops:main`,
 * `discord:direct:1`) can never become two sessions, and junk is refused with a clear reason
 * before it reaches Redis or a file name.
 */
import { defaultAgentId, findAgent } from "../config/agents.js";
import type { Config } from "../config/schema.js";
import { InvalidSessionKeyError, ValidationError } from "../errors/index.js";
import { transcriptTopicProblem } from "./transcript-topic.js";
import { DEFAULT_AGENT_ID, assertAgentId, isValidAgentId } from "./agent-id.js";
import { MAX_SESSION_KEY_LENGTH } from "./key-build.js";
import { chatMarkerIndex, isNonChatRoot } from "./key-classify.js";
import { agentIdFromSessionKey, parseAgentSessionKey } from "./key-parse.js";
import { unsafeCharMessage } from "./unsafe-chars.js";

export interface CanonicalKeyOptions {
  /** The agent bare keys belong to; default: the config's default agent. */
  agentId?: string | undefined;
}

/**
 * Rewrites the segments of an agent-stripped rest into canonical form:
 * - legacy bare group keys: WhatsApp `group:<id>@g.us` → `whatsapp:group:…`,
 *   other `group:<x>`/`channel:<x>` → `unknown:group:<x>` / `unknown:channel:<x>`;
 * - the DM marker `direct` → `dm` (only in the DM positions `direct:<p>`, `<ch>:direct:<p>`,
 *   `<ch>:<acct>:direct:<p>`, so a peer or job literally named `direct` is left alone).
 */
export function canonicalizeRestSegments(segments: readonly string[]): string[] {
  let segs = [...segments];
  const first = segs[0];
  if ((first === "group" || first === "channel") && segs.length > 1) {
    const isWhatsApp = first === "group" && (segs[segs.length - 1] as string).endsWith("@g.us");
    segs = [isWhatsApp ? "whatsapp" : "unknown", ...segs];
  }
  const idx = chatMarkerIndex(segs);
  if (idx >= 0 && idx <= 2 && segs[idx] === "direct" && !isNonChatRoot(segs[0])) segs[idx] = "dm";
  return segs;
}

function isKnownAgent(config: Config, agentId: string): boolean {
  return defaultAgentId(config) === agentId || findAgent(config, agentId) !== undefined;
}

function fail(key: string, reason: string): never {
  throw new InvalidSessionKeyError(key, reason);
}

/**
 * Canonical store key for `key` (see the module comment). Reserved `global`/`unknown` are
 * returned as they are; main aliases become `agent:<a>:<mainKey>` (or `global` with
 * `scope: "global"`); bare keys are owned by `opts.agentId` or the default agent.
 * Throws ValidationError for control, bidi or invisible characters (the message names the
 * character and its index in `key`), InvalidSessionKeyError (empty, too long, `agent::broken`,
 * bad agent id segment) or InvalidAgentIdError (bad `opts.agentId`).
 */
export function canonicalSessionKey(config: Config, key: string, opts: CanonicalKeyOptions = {}): string {
  if (typeof key !== "string") fail(String(key), "session key must be a string");
  const unsafe = unsafeCharMessage("session key", key, { trimmed: true });
  if (unsafe) throw new ValidationError(unsafe, [{ path: "(root)", message: unsafe }]);
  const trimmed = key.trim();
  if (!trimmed) fail(key, "session key is empty");
  if (trimmed.length > MAX_SESSION_KEY_LENGTH)
    fail(`${trimmed.slice(0, 80)}…`, `longer than ${MAX_SESSION_KEY_LENGTH} characters`);

  const lower = trimmed.toLowerCase();
  if (lower === "global" || lower === "unknown") return lower;

  const ownerAgentId = opts.agentId !== undefined ? assertAgentId(opts.agentId) : defaultAgentId(config);
  const mainKey = config.session.mainKey;
  const isMainRest = (rest: string): boolean => rest === mainKey || rest === "main";
  const mainOf = (agentId: string): string =>
    config.session.scope === "global" ? "global" : `agent:${agentId}:${mainKey}`;

  let agentId: string;
  let segs: string[];
  if (lower.startsWith("agent:")) {
    const parsed = parseAgentSessionKey(lower);
    if (!parsed) fail(key, "malformed agent session key (expected agent:<agentId>:<rest>)");
    if (!isValidAgentId(parsed.agentId)) {
      fail(key, `invalid agent id segment ${JSON.stringify(parsed.agentId)} (must match [a-z0-9][a-z0-9_-]{0,63})`);
    }
    agentId = parsed.agentId;
    segs = parsed.rest.split(":");
    // #29683: an orphan `agent:main:<mainKey>` written for a non-main default agent. Only
    // when no agent is really called `main` (neither configured nor the implicit default),
    // otherwise that would steal its session.
    if (
      agentId === DEFAULT_AGENT_ID &&
      ownerAgentId !== DEFAULT_AGENT_ID &&
      isMainRest(parsed.rest) &&
      !isKnownAgent(config, DEFAULT_AGENT_ID)
    ) {
      agentId = ownerAgentId;
    }
  } else {
    agentId = ownerAgentId;
    segs = lower.split(":").filter(Boolean);
    if (segs.length === 0) fail(key, "session key has no segments");
  }

  const rest = canonicalizeRestSegments(segs).join(":");
  if (isMainRest(rest)) return mainOf(agentId);
  const out = `agent:${agentId}:${rest}`;
  if (out.length > MAX_SESSION_KEY_LENGTH)
    fail(`${trimmed.slice(0, 80)}…`, `longer than ${MAX_SESSION_KEY_LENGTH} characters once canonical`);
  const topic = transcriptTopicProblem(out);
  if (topic) fail(`${trimmed.slice(0, 80)}…`, topic);
  return out;
}

/**
 * The key as tools show it: the requester agent's own main session (or `global` with scope
 * global) reads `main`, everything else is shown as stored. Tools never show `global`.
 */
export function displaySessionKey(config: Config, key: string, requesterAgentId: string): string {
  const lower = key.trim().toLowerCase();
  if (lower === "global" && config.session.scope === "global") return "main";
  if (lower === `agent:${requesterAgentId.trim().toLowerCase()}:${config.session.mainKey}`) return "main";
  return key;
}

/**
 * Tool input → canonical key for the calling session: `main` is the caller agent's main
 * session, `current` the caller itself, anything else is canonicalised with the caller's agent
 * as owner of bare keys. Pure: a stored key literally named `current` and sessionId (UUID)
 * lookups need the store, so the tools layer checks those before calling this.
 */
export function resolveToolSessionRef(config: Config, input: string, ctx: { requesterKey: string }): string {
  const requesterAgentId = agentIdFromSessionKey(ctx.requesterKey, defaultAgentId(config));
  const ref = input.trim().toLowerCase();
  if (ref === "current") return canonicalSessionKey(config, ctx.requesterKey, { agentId: requesterAgentId });
  if (ref === "main") {
    return config.session.scope === "global" ? "global" : `agent:${requesterAgentId}:${config.session.mainKey}`;
  }
  return canonicalSessionKey(config, input, { agentId: requesterAgentId });
}

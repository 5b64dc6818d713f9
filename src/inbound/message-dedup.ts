/**
 * De-duplicating inbound messages that carry a channel `messageId` (webhook retries, and the same
 * message sent again while its first delivery is still handled, on any gateway): each message is
 * claimed under a key, handled once, and its answer kept for a day; a retry gets that answer, or
 * the run the first delivery queued. Keys are per agent, the default agent's under the key earlier
 * releases used for every agent, with the rolling-upgrade rules below (handledBeforeAgentKeys).
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { defaultAgentId } from "../config/agents.js";
import { SwitchboardError } from "../errors/index.js";
import { requestDrain } from "../runs/enqueue.js";
import { uuidFrom } from "../runs/derived-id.js";
import type { RunRecord } from "../runs/run-records.js";
import type { InboundMessage } from "../session/inbound-message.js";
import { luaCommand } from "../storage/lua-script.js";
import type { InboundDeps, InboundResult } from "./inbound-result.js";

/** How long a channel's messageId is remembered for de-duplicating webhook retries. */
const MESSAGE_DEDUP_SECONDS = 24 * 3600;

/** A message with a messageId, its two de-dup keys, and how to handle it once (with the derived runId). */
export interface DedupTarget {
  svc: InboundDeps;
  msg: InboundMessage;
  agentId: string;
  sessionKey: string;
  /** The key earlier releases used for every agent (inboundMessageKey without the agent). */
  legacyKey: string;
  /** This agent's own key. */
  agentKey: string;
  handle(runId: string): Promise<InboundResult>;
}

/** Handle `t` once across retries and gateways, or answer with what its first delivery did. */
export async function handleDeduplicated(t: DedupTarget): Promise<InboundResult> {
  const { svc, msg, agentId, sessionKey, legacyKey, agentKey, handle } = t;
  const claim = `${DEDUP_PENDING}${randomUUID()}:agent:${encodeURIComponent(agentId)}`;
  const ctx: DedupContext = { svc, msg, agentId, sessionKey, claim, defaultAgent: defaultAgentId(svc.config), handle };
  if (agentId === ctx.defaultAgent) {
    const answer = await handleOnce(ctx, legacyKey);
    if (answer !== OTHER_AGENT) return answer;
    // The legacy key holds another agent's message with this id (see handledBeforeAgentKeys).
    return ownAnswer(await handleOnce(ctx, agentKey));
  }
  const before = await handledBeforeAgentKeys(ctx, legacyKey);
  if ("answer" in before) return before.answer;
  return ownAnswer(await handleOnce(ctx, agentKey, before.mirrored ? legacyKey : undefined));
}

/** What de-duplicating one message with a messageId works with. */
interface DedupContext {
  svc: InboundDeps;
  msg: InboundMessage;
  agentId: string;
  sessionKey: string;
  defaultAgent: string;
  /**
   * The value this handler claims a key with. Earlier releases test only its `pending:` prefix;
   * the agent after it tells this release's gateways whose claim it is.
   */
  claim: string;
  handle(runId: string): Promise<InboundResult>;
}

/** A de-dup key that holds another agent's message with the same id: not an answer for this one. */
const OTHER_AGENT = Symbol("other agent");

function ownAnswer(answer: InboundResult | typeof OTHER_AGENT): InboundResult {
  // An agent's own key only ever holds that agent's message and derives only that agent's runId.
  if (answer === OTHER_AGENT) throw new SwitchboardError("internal", "an agent's de-dup key names another agent");
  return answer;
}

/** Whether a record or run that names `owner` (none: an old record, the default agent's) is this agent's. */
function isMine(ctx: DedupContext, owner: string | undefined): boolean {
  return (owner ?? ctx.defaultAgent) === ctx.agentId;
}

/**
 * The answer to a run queued for this message: its first attempt may have queued the turn and
 * died before waking the drainer, so the drainer is woken.
 */
async function runAnswer(ctx: DedupContext, run: RunRecord): Promise<InboundResult> {
  await requestDrain(ctx.svc, run.sessionKey);
  return {
    ok: true,
    agentId: ctx.agentId,
    sessionKey: run.sessionKey,
    ...(run.sessionId ? { sessionId: run.sessionId } : {}),
    runId: run.runId,
    duplicate: true,
  };
}

async function releaseClaim(ctx: DedupContext, key: string): Promise<void> {
  await luaCommand(ctx.svc.redis, LUA_DIR, "claim-release")([key], [ctx.claim]).catch(() => undefined);
}

/**
 * Handle the message once under `key`, or answer with the run an earlier delivery queued.
 * `mirrorKey` is the legacy key when this handler holds a claim on it too (a non-default agent's
 * message, see handledBeforeAgentKeys): it gets the same answer, or is given back on failure.
 */
async function handleOnce(
  ctx: DedupContext,
  key: string,
  mirrorKey?: string,
): Promise<InboundResult | typeof OTHER_AGENT> {
  let answer: InboundResult | typeof OTHER_AGENT;
  try {
    answer = await claimAndHandle(ctx, key);
  } catch (err) {
    if (mirrorKey) await releaseClaim(ctx, mirrorKey);
    throw err;
  }
  if (mirrorKey) {
    if (answer === OTHER_AGENT) await releaseClaim(ctx, mirrorKey);
    else {
      const { duplicate: _, ...record } = answer;
      await luaCommand(
        ctx.svc.redis,
        LUA_DIR,
        "claim-settle",
      )([mirrorKey], [ctx.claim, JSON.stringify(record), String(MESSAGE_DEDUP_SECONDS)]);
    }
  }
  return answer;
}

async function claimAndHandle(ctx: DedupContext, key: string): Promise<InboundResult | typeof OTHER_AGENT> {
  const { svc, msg, claim } = ctx;
  // The run of a message with an id is derived from that id: an earlier attempt that queued the
  // turn but failed afterwards (the drain wake-up, the answer) is completed, not run again.
  const runId = uuidFrom(key);
  // Claim the messageId before handling it: a channel that retries a slow webhook sends the
  // same message again while the first delivery is still being handled (on any gateway).
  const deadline = Date.now() + DEDUP_WAIT_MS;
  for (;;) {
    if (await svc.redis.set(key, claim, "EX", DEDUP_CLAIM_SECONDS, "NX")) break;
    const prior = await svc.redis.get(key);
    if (prior && !prior.startsWith(DEDUP_PENDING)) {
      const answer = JSON.parse(prior) as InboundResult;
      return isMine(ctx, answer.agentId) ? { ...answer, duplicate: true } : OTHER_AGENT;
    }
    if (prior) {
      // Being handled elsewhere, or its handler died holding the claim: once its turn is queued
      // that turn is the answer. Until then nothing may be acknowledged, as the message may
      // never be queued (a dead handler's claim only expires after DEDUP_CLAIM_SECONDS).
      const queued = await svc.runs.get(runId);
      if (queued) return isMine(ctx, queued.agentId) ? await runAnswer(ctx, queued) : OTHER_AGENT;
      if (Date.now() > deadline) {
        throw new SwitchboardError(
          "unavailable",
          `message ${msg.messageId} is still being handled by another request; retry later`,
        );
      }
      await sleep(DEDUP_POLL_MS);
    }
    // no value: the first handler failed and gave the id back; claim it ourselves
  }
  let result: InboundResult;
  try {
    const earlier = await svc.runs.get(runId);
    if (earlier && !isMine(ctx, earlier.agentId)) {
      // An earlier release's run of another agent's message, its answer gone: not this message.
      await releaseClaim(ctx, key);
      return OTHER_AGENT;
    }
    result = earlier ? await runAnswer(ctx, earlier) : await ctx.handle(runId);
  } catch (err) {
    await releaseClaim(ctx, key);
    throw err;
  }
  await svc.redis.set(key, JSON.stringify(result), "EX", MESSAGE_DEDUP_SECONDS);
  return result;
}

/**
 * For a non-default agent's message: the legacy key (no agent in it), which gateways of earlier
 * releases used for every agent and derived the runId from. Either the answer an earlier release
 * gave this message, or whether this handler now holds a claim on the legacy key (`mirrored`).
 *
 * Older to newer: a record there (or its run, once the record is gone or not yet written) is this
 * message's only when it names this agent, as it may be another agent's message with the same
 * id. A claim there that names no agent is an earlier release handling some agent's message: its
 * answer or run is waited for (as for a claim on the agent's own key), then decides.
 *
 * Newer to older: an earlier release reads only the legacy key and takes any answer there as its
 * message's, so this handler claims it when free and leaves its answer there too: a retry that
 * reaches an older gateway, also while this one is still handling the message, is a duplicate.
 * The default agent's message finding another agent's answer there is not that one's duplicate:
 * it is remembered under its own agent key instead.
 *
 * Gaps, only while gateways of both releases run (and their records live, MESSAGE_DEDUP_SECONDS):
 * an older gateway still answers a message as the duplicate of another agent's message with the
 * same id, as it always did, now also when a newer gateway handled that one (the price of the
 * record that protects retries); and when another agent's message held the legacy key while this
 * one was handled and then gave it back (its handling failed), a retry of this one that reaches
 * an older gateway runs it again.
 */
async function handledBeforeAgentKeys(
  ctx: DedupContext,
  legacyKey: string,
): Promise<{ answer: InboundResult } | { mirrored: boolean }> {
  const { svc, msg, claim } = ctx;
  const runId = uuidFrom(legacyKey);
  const deadline = Date.now() + DEDUP_WAIT_MS;
  for (;;) {
    if (await svc.redis.set(legacyKey, claim, "EX", DEDUP_CLAIM_SECONDS, "NX")) {
      // Free; an earlier release's run may have outlived its answer there.
      let run: RunRecord | null;
      try {
        run = await svc.runs.get(runId);
        if (run && isMine(ctx, run.agentId)) {
          const { duplicate: _, ...record } = await runAnswer(ctx, run);
          await svc.redis.set(legacyKey, JSON.stringify(record), "EX", MESSAGE_DEDUP_SECONDS);
          return { answer: { ...record, duplicate: true } };
        }
      } catch (err) {
        await releaseClaim(ctx, legacyKey);
        throw err;
      }
      if (!run) return { mirrored: true };
      await releaseClaim(ctx, legacyKey);
      return { mirrored: false };
    }
    const prior = await svc.redis.get(legacyKey);
    if (prior === null) continue; // given back between the two reads
    if (!prior.startsWith(DEDUP_PENDING)) {
      const answer = JSON.parse(prior) as InboundResult;
      return isMine(ctx, answer.agentId) ? { answer: { ...answer, duplicate: true } } : { mirrored: false };
    }
    // A claim of this release names its agent: that agent's own key covers its retries.
    if (prior.includes(":agent:")) return { mirrored: false };
    const run = await svc.runs.get(runId);
    if (run) return isMine(ctx, run.agentId) ? { answer: await runAnswer(ctx, run) } : { mirrored: false };
    if (Date.now() > deadline) {
      throw new SwitchboardError(
        "unavailable",
        `message ${msg.messageId} is still being handled by another request; retry later`,
      );
    }
    await sleep(DEDUP_POLL_MS);
  }
}

const DEDUP_PENDING = "pending:";
/** How long a claim outlives a gateway that died while handling the message. */
const DEDUP_CLAIM_SECONDS = 30;
/** How long a duplicate waits for the first delivery's answer before asking the caller to retry. */
const DEDUP_WAIT_MS = 10_000;
const DEDUP_POLL_MS = 20;
const LUA_DIR = new URL("./lua/", import.meta.url);

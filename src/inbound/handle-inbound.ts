/**
 * `POST /v1/inbound`: a channel message arrives. Resolve its session key, evaluate freshness at
 * the message time, handle reset triggers and the standalone commands (`/send`, `/status`,
 * `/stop`), enforce sendPolicy, record origin and delivery route, and enqueue the turn.
 * Runs in the gateway; everything it writes is atomic in Redis, so any number of gateways can
 * take inbound traffic for the same session at once.
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { RunDeps } from "../runs/run-deps.js";
import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { agentRuntime, defaultAgentId } from "../config/agents.js";
import { SwitchboardError, ValidationError } from "../errors/index.js";
import { zodIssues } from "../config/parse.js";
import { freshnessOf, lastActivityOf, policyFor, staleAtFor, withPatch } from "../session/entry-freshness.js";
import { enqueueArchive, resetPatch, rotateSession } from "../rotation/rotate.js";
import { writeSessionSettings } from "../rotation/session-settings.js";
import { identOf } from "../session/session-ident.js";
import { statusCard } from "../session/status-card.js";
import { doorLimit, enqueueTurnInSession, requestDrain } from "../runs/enqueue.js";
import { uuidFrom } from "../runs/derived-id.js";
import type { RunRecord } from "../runs/run-records.js";
import { luaCommand } from "../storage/lua-script.js";
import { stopSessionAndSilence } from "../subagents/descendants.js";
import { parseChatCommand } from "../session/chat-commands.js";
import { InboundMessageSchema, type InboundMessage } from "../session/inbound-message.js";
import { resolveInboundSession } from "../session/key-build.js";
import { commandTextOf, effectiveResetTriggers, greetingPrompt, parseResetTrigger } from "../session/reset-triggers.js";
import { modelCatalog, resolveModelChoice } from "./model-choice.js";
import { SYSTEM_EVENT_CHANNELS } from "../session/inbound-message.js";
import { sessionSendPolicy } from "../session/stored-send-policy.js";
import { storedRoute, type DeliveryRoute } from "../session/stored-route.js";
import {
  replacingFields,
  type DeliveryContext,
  type SessionEntry,
  type SessionEntryPatch,
} from "../session/session-entry.js";
import { transcriptTopicProblem } from "../session/transcript-topic.js";
import { enqueueDelivery } from "../delivery/deliver.js";
import { isCommandOwner, OWNER_ONLY_REPLY } from "./command-owner.js";
import { effectiveTools } from "../subagents/tool-policy.js";

export interface InboundResult {
  ok: true;
  agentId: string;
  sessionKey: string;
  sessionId?: string;
  runId?: string;
  isNewSession?: boolean;
  resetReason?: string;
  blocked?: "send_policy_deny";
  command?: "send" | "status" | "stop" | "tools";
  sendPolicy?: "allow" | "deny" | "inherit";
  stopped?: number;
  status?: string;
  duplicate?: boolean;
  /** An owner-only command from someone who is not an owner: nothing was changed. */
  refused?: "not_owner";
}

/** How long a channel's messageId is remembered for de-duplicating webhook retries. */
const MESSAGE_DEDUP_SECONDS = 24 * 3600;
const MAX_ROTATION_RACES = 5;

export function parseInbound(body: unknown): InboundMessage {
  const r = InboundMessageSchema.safeParse(body);
  if (!r.success) throw ValidationError.fromIssues("invalid inbound message", zodIssues(r.error));
  return r.data;
}

/**
 * The key part a message id is remembered under: per channel, account, conversation and agent.
 * Message ids are only unique within a chat on some channels (Telegram's `message_id` per chat,
 * Slack's `ts` per channel), so two chats sending the same id are two messages. The conversation
 * is the chat a reply goes to; the parts that come from the sender are escaped so none can end
 * early (`encodeURIComponent` escapes `:` too, so the agent suffix cannot be forged by an id).
 *
 * One channel message handed to two agents (`agentId`) is two messages: each agent must get it.
 * `agent` is given for an agent's own key. Without it, the key is the one releases before the
 * agent was part of it wrote for every agent (a message without `agentId` goes to the default
 * agent). The default agent is still remembered under it: a webhook retried across a rolling
 * upgrade finds the record an older gateway left, and the runId derived from the key is the
 * same, so it is not run twice. Another agent is remembered under its own key, and under the
 * legacy one too when that is free, for older gateways; see `handledBeforeAgentKeys`.
 */
export function inboundMessageKey(msg: InboundMessage, messageId: string, agent?: string): string {
  const part = (s: string) => encodeURIComponent(s);
  const chat = `${msg.chatType}:${part(routeOf(msg).to)}`;
  const key = `inmsg:${msg.channel}:${part(msg.accountId ?? "default")}:${chat}:${part(messageId)}`;
  return agent === undefined ? key : `${key}:agent:${part(agent)}`;
}

function routeOf(msg: InboundMessage) {
  const to = msg.chatType === "dm" ? msg.from : (msg.groupId ?? msg.to ?? msg.from);
  return {
    channel: msg.channel,
    to,
    ...(msg.accountId ? { accountId: msg.accountId } : {}),
    ...(msg.threadId !== undefined ? { threadId: String(msg.threadId) } : {}),
  };
}

/** What handling an inbound message touches: the session and run stores, queues, the config's routing. */
export interface InboundDeps extends RunDeps {
  config: Config;
  log: Logger;
  keys: RedisKeys;
  redis: RedisClient;
}

export async function handleInbound(svc: InboundDeps, body: unknown): Promise<InboundResult> {
  const msg = parseInbound(body);
  const { agentId, sessionKey } = resolveInboundSession(svc.config, msg);
  // A topic whose transcript file cannot be named would fail every turn: refused now, not accepted.
  const topicProblem = transcriptTopicProblem(sessionKey);
  if (topicProblem) {
    const message = `threadId: ${topicProblem}`;
    throw new ValidationError(message, [{ path: "threadId", message }]);
  }
  if (!msg.messageId) return await handleResolved(svc, msg, agentId, sessionKey);
  // Remembered per agent, the default agent under the key earlier releases used (inboundMessageKey).
  const legacyKey = `${svc.keys.base}:${inboundMessageKey(msg, msg.messageId)}`;
  const agentKey = `${svc.keys.base}:${inboundMessageKey(msg, msg.messageId, agentId)}`;
  const claim = `${DEDUP_PENDING}${randomUUID()}:agent:${encodeURIComponent(agentId)}`;
  const ctx: DedupContext = { svc, msg, agentId, sessionKey, claim, defaultAgent: defaultAgentId(svc.config) };
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
  const { svc, msg, agentId, sessionKey, claim } = ctx;
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
    result = earlier ? await runAnswer(ctx, earlier) : await handleResolved(svc, msg, agentId, sessionKey, runId);
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

/**
 * The instant a message counts at for its session's lifecycle (freshness, activity, the stale
 * clock): its own timestamp (a channel's delayed or replayed message is judged when it was
 * sent), unless that lies further ahead of this gateway's clock than `aheadMs`
 * (`gateway.limits.timestampAheadMs`, 5 min: the skew hosts may have). A session's updatedAt
 * only moves forward, so one message stamped years ahead would switch off its daily and idle
 * resets, and its pruning, for good: such a timestamp is not believed.
 */
function lifecycleTime(timestamp: number | undefined, wallClock: number, aheadMs: number): number {
  return timestamp !== undefined && timestamp <= wallClock + aheadMs ? timestamp : wallClock;
}

/**
 * The send policy a message runs under: the session's override as it will stand when the turn
 * runs. A message that rolls the session over (it is stale, or a reset trigger) runs in an entry
 * the rollover cleared, so an `allow` override of the retiring session must not let it through a
 * deny rule: it would run the model for a reply nobody may see (OpenClaw checks before the run).
 * A `deny` override still holds, as it did before: a muted session is not unmuted by a message.
 */
function runPolicy(
  config: Config,
  msg: InboundMessage,
  sessionKey: string,
  entry: SessionEntry | null,
  now: number,
  trigger: ReturnType<typeof parseResetTrigger>,
): "allow" | "deny" {
  const where = { channel: msg.channel, chatType: msg.chatType };
  const before = sessionSendPolicy(config, sessionKey, entry, where);
  // A deny (a muted session) holds: no message lifts it by rolling the session over.
  if (before === "deny" || !entry || SYSTEM_EVENT_CHANNELS.has(msg.channel)) return before;
  const fresh = freshnessOf(config, entry, now, msg.channel);
  if (!trigger.triggered && fresh.fresh) return before;
  const reason = trigger.triggered ? trigger.command : (fresh.staleReason ?? "daily");
  const rollover = resetPatch(entry, entry.sessionId, reason, trigger.triggered ? "explicit" : "stale");
  return sessionSendPolicy(config, sessionKey, withPatch(entry, rollover), where);
}

async function handleResolved(
  svc: InboundDeps,
  msg: InboundMessage,
  agentId: string,
  sessionKey: string,
  runId?: string,
): Promise<InboundResult> {
  const { config } = svc;
  const now = lifecycleTime(msg.timestamp, Date.now(), config.gateway.limits.timestampAheadMs);
  const ident = identOf(config, sessionKey);
  const base = { ok: true as const, agentId, sessionKey };
  // Commands and triggers are looked for after a group's leading @-mentions of the bot.
  const commandText = commandTextOf(msg.text, msg.chatType);
  const command = parseChatCommand(commandText);

  let entry = await svc.sessions.get(sessionKey);
  // A system event (heartbeat, cron or exec event) is not where the session is reached: on a
  // session that has a route it records none, and its reply goes where the session's last
  // person-sent message came from (OpenClaw keeps internal traffic off lastChannel/lastTo).
  const kept = SYSTEM_EVENT_CHANNELS.has(msg.channel) ? storedRoute(sessionKey, entry) : undefined;
  const route: DeliveryRoute = kept ?? routeOf(msg);
  // The policy where this message arrived (its channel and chat type), with the session's override.
  const sendPolicy = () =>
    sessionSendPolicy(config, sessionKey, entry, { channel: msg.channel, chatType: msg.chatType });

  // Metadata of where the session is reached: recorded without counting as activity.
  const meta: SessionEntryPatch = kept
    ? {}
    : {
        channel: msg.channel,
        chatType: msg.chatType,
        ...(msg.groupId ? { groupId: msg.groupId } : {}),
        ...(msg.groupSubject
          ? { subject: msg.groupSubject, displayName: msg.groupSubject }
          : msg.senderName && msg.chatType === "dm"
            ? { displayName: msg.senderName }
            : {}),
        origin: {
          provider: msg.channel,
          chatType: msg.chatType,
          from: msg.from,
          ...(msg.to ? { to: msg.to } : {}),
          ...(msg.accountId ? { accountId: msg.accountId } : {}),
          ...(msg.threadId !== undefined ? { threadId: String(msg.threadId) } : {}),
          // A group is named by its subject, never by whoever happened to write last; a DM by its sender.
          ...(msg.chatType === "dm"
            ? msg.senderName
              ? { label: msg.senderName }
              : {}
            : msg.groupSubject
              ? { label: msg.groupSubject }
              : {}),
        },
        // The route of this message, whole: an account or thread the previous one had is removed
        // (null), so a reply never goes out through the bot account of an earlier message.
        deliveryContext: replacingFields<DeliveryContext>(route, ["accountId", "threadId"]),
        lastChannel: route.channel,
        lastTo: route.to,
        lastAccountId: route.accountId ?? null,
        lastThreadId: route.threadId ?? null,
      };

  if (command?.kind === "send") {
    // Owner-only: anyone else changes nothing and is told so (the message is not run either).
    if (!isCommandOwner(config, msg)) {
      // Told so only where the bot may speak: a denied chat hears nothing, as for any message.
      if (sendPolicy() !== "deny") await reply(svc, sessionKey, route, OWNER_ONLY_REPLY, "command", msg.chatType);
      return { ...base, ...(entry ? { sessionId: entry.sessionId } : {}), command: "send", refused: "not_owner" };
    }
    if ("error" in command) throw new ValidationError(command.error);
    // A stale session is rolled over first, with the policy set in the same step, as the next
    // message or the sweep would roll it over (which clears per-session overrides): otherwise
    // the policy would go on the retiring session and be lost with it. A rollover refused (turns
    // queued or running, or the entry changed) leaves the policy on the session as it is.
    const stale = entry ? freshnessOf(config, entry, now, msg.channel) : undefined;
    const rolled =
      entry && stale && !stale.fresh
        ? await rotateSession(svc, entry, {
            reason: stale.staleReason ?? "daily",
            now,
            archive: "job",
            activity: "preserve",
            onlyIfUntouchedAndIdle: true,
            extra: { ...meta, sendPolicy: command.value },
          })
        : null;
    // Not activity, but a policy a rollover clears: written with its stale instant.
    entry =
      rolled ??
      (await writeSessionSettings(
        svc,
        sessionKey,
        { ...(entry ? {} : { sessionId: randomUUID() }), ...meta, sendPolicy: command.value },
        { before: entry, mode: "upsert", now },
      ));
    const effective = sendPolicy();
    await reply(
      svc,
      sessionKey,
      route,
      `Send policy: ${command.value ?? `inherit (${effective})`}.`,
      "command",
      msg.chatType,
    );
    return { ...base, sessionId: entry.sessionId, command: "send", sendPolicy: command.value ?? "inherit" };
  }

  // Reset triggers, looked for once: they decide the policy the message runs under, and its session.
  const trigger = parseResetTrigger(commandText, effectiveResetTriggers(config.session.resetTriggers));
  if (runPolicy(config, msg, sessionKey, entry, now, trigger) === "deny") {
    svc.log.info({ sessionKey }, "Send blocked by policy for session");
    return { ...base, blocked: "send_policy_deny" };
  }

  if (command?.kind === "status") {
    const [depth, running] = await Promise.all([svc.inbox.depth(sessionKey), svc.inbox.hasInflight(sessionKey)]);
    const runtime = agentRuntime(config, agentId);
    const text = statusCard(entry, {
      queueDepth: depth,
      running,
      sendPolicy: sendPolicy(),
      ...(runtime.kind === "openai" ? { model: runtime.model } : {}),
    });
    await reply(svc, sessionKey, route, text, "command", msg.chatType);
    return { ...base, ...(entry ? { sessionId: entry.sessionId } : {}), command: "status", status: text };
  }

  if (command?.kind === "tools") {
    const tools = effectiveTools(config, {
      ...(entry?.spawnDepth ? { spawnDepth: entry.spawnDepth } : {}),
      ...(entry?.subagentRole ? { subagentRole: entry.subagentRole } : {}),
    });
    const text = `Tools: ${tools.length ? tools.join(", ") : "none"}`;
    await reply(svc, sessionKey, route, text, "command", msg.chatType);
    return { ...base, ...(entry ? { sessionId: entry.sessionId } : {}), command: "tools", status: text };
  }

  if (command?.kind === "stop") {
    // The user said stop: the sub-agents stopped with the session report nothing afterwards.
    const stopped = await stopSessionAndSilence(svc, sessionKey);
    if (entry)
      await writeSessionSettings(svc, sessionKey, { abortedLastRun: stopped > 0 }, { before: entry, mode: "upsert" });
    await reply(
      svc,
      sessionKey,
      route,
      stopped > 0 ? `Stopped ${stopped} run(s).` : "Nothing to stop.",
      "command",
      msg.chatType,
    );
    return { ...base, ...(entry ? { sessionId: entry.sessionId } : {}), command: "stop", stopped };
  }

  // Reset triggers and freshness, evaluated at the message time. A compare-and-set on the
  // sessionId means concurrent messages (on any gateway) rotate a stale session exactly once.
  for (let attempt = 0; ; attempt++) {
    const fresh = entry ? freshnessOf(config, entry, now, msg.channel) : undefined;
    // System events (heartbeats, cron and exec events) never reset a session, stale or not.
    const systemEvent = SYSTEM_EVENT_CHANNELS.has(msg.channel);
    const rotate = !entry || (!systemEvent && (trigger.triggered || !fresh?.fresh));
    const resetReason = systemEvent
      ? undefined
      : trigger.triggered
        ? trigger.command
        : entry && fresh && !fresh.fresh
          ? fresh.staleReason
          : undefined;
    let text = msg.text;
    // The instant this message's activity counts at: never before the session's own last
    // activity, its reset included. A message stamped before a rollover but arriving after it
    // (a channel's delay) lands in the new session; counted at its own time it would clear
    // resetAt and set that session's clock back before the boundary just passed, and the sweep
    // would roll it over a second time for the same boundary. (Freshness at `now` is the same
    // as at `at`: a session is always fresh at or before its last activity.)
    const at = entry ? Math.max(now, lastActivityOf(entry)) : now;
    // A message is activity: it ends the "untouched since a sweep/sessions.reset" state.
    const patch: SessionEntryPatch = { ...meta, updatedAt: at, resetAt: null };
    if (trigger.triggered && !systemEvent) {
      const hint = resolveModelChoice(trigger.remainder, modelCatalog(config));
      if (hint.choice) {
        patch.modelOverride = hint.choice.model;
        patch.providerOverride = hint.choice.provider ?? null;
      }
      text = hint.rest.trim() ? hint.rest : greetingPrompt(now, policyFor(config, sessionKey, msg.channel).timezone);
    }
    const newSessionId = rotate ? randomUUID() : entry!.sessionId;
    if (rotate)
      Object.assign(
        patch,
        entry
          ? {
              ...resetPatch(entry, newSessionId, resetReason ?? "new", trigger.triggered ? "explicit" : "stale"),
              ...meta,
            }
          : { sessionId: newSessionId },
      );
    try {
      const next = await svc.sessions.upsert(sessionKey, ident, patch, {
        now: at,
        staleAt: staleAtFor(config, sessionKey, at, msg.channel),
        ...(entry ? { expectSessionId: entry.sessionId } : { mode: "create" as const }),
        // The turn carries the archive; recorded too, in case it is never queued (a failed push).
        archiveRetired: rotate,
      });
      // Queued only if the session is still the one just written: a reset from another gateway
      // in between retired it (and may be archiving it), so the message is decided again. And only
      // if its inbox is not full (gateway.limits.maxQueuedTurns): else 429 queue_full.
      const pushed = await enqueueTurnInSession(
        svc,
        {
          ...(runId ? { runId } : {}),
          sessionKey,
          agentId,
          sessionId: next.sessionId,
          text,
          step: "turn",
          provenance: "user",
          messageTs: now,
          deliver: route,
          ...(rotate && entry ? { archive: { sessionId: entry.sessionId, kind: "reset" as const } } : {}),
        },
        doorLimit(svc.config),
      );
      if ("changed" in pushed) {
        // This attempt's own rotation retired the old sessionId: its archive goes by job now.
        if (rotate && entry)
          await enqueueArchive(svc, { sessionKey, agentId, sessionId: entry.sessionId, kind: "reset" });
        if (attempt >= MAX_ROTATION_RACES)
          throw new SwitchboardError("unavailable", "the session kept being reset while the message was queued");
        entry = pushed.changed === null ? null : (JSON.parse(pushed.changed) as SessionEntry);
        continue;
      }
      return {
        ...base,
        sessionId: next.sessionId,
        runId: pushed.turn.runId,
        isNewSession: rotate,
        ...(resetReason ? { resetReason } : {}),
      };
    } catch (err) {
      const code = (err as { code?: string }).code;
      if ((code === "session_conflict" || code === "session_exists") && attempt < MAX_ROTATION_RACES) {
        entry = await svc.sessions.get(sessionKey); // someone else rotated or created it first: re-evaluate
        continue;
      }
      throw err;
    }
  }
}

async function reply(
  svc: InboundDeps,
  sessionKey: string,
  route: DeliveryRoute,
  message: string,
  kind: string,
  chatType: string,
): Promise<void> {
  await enqueueDelivery(svc, { id: `cmd-${randomUUID()}`, sessionKey, route, message, kind, chatType });
}

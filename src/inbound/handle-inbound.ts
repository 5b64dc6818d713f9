/**
 * `POST /v1/inbound`: a channel message arrives. Resolve its session key, evaluate freshness at
 * the message time, handle reset triggers and the standalone commands (`/send`, `/status`,
 * `/stop`), enforce sendPolicy, record origin and delivery route, and enqueue the turn.
 * Runs in the gateway; everything it writes is atomic in Redis, so any number of gateways can
 * take inbound traffic for the same session at once. A message with a channel `messageId` is
 * handled once across retries and gateways (src/inbound/message-dedup.ts).
 */
import { randomUUID } from "node:crypto";
import type { Config } from "../config/schema.js";
import { agentRuntime } from "../config/agents.js";
import { SwitchboardError, ValidationError } from "../errors/index.js";
import { zodIssues } from "../config/parse.js";
import { freshnessOf, lastActivityOf, policyFor, staleAtFor, withPatch } from "../session/entry-freshness.js";
import { enqueueArchive, resetPatch, rotateSession } from "../rotation/rotate.js";
import { writeSessionSettings } from "../rotation/session-settings.js";
import { identOf } from "../session/session-ident.js";
import { statusCard } from "../session/status-card.js";
import { doorLimit, enqueueTurnIfEntry, enqueueTurnInSession, type TurnRequest } from "../runs/enqueue.js";
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
  knownFrom,
  replacingFields,
  type DeliveryContext,
  type SessionEntry,
  type SessionEntryPatch,
} from "../session/session-entry.js";
import { transcriptTopicProblem } from "../session/transcript-topic.js";
import { patchChangesNothing } from "../session/entry-patch.js";
import { activityEveryMs, cachedStaleAt } from "../rotation/turn-session.js";
import { enqueueDelivery } from "../delivery/deliver.js";
import { isCommandOwner, OWNER_ONLY_REPLY } from "./command-owner.js";
import { effectiveTools } from "../subagents/tool-policy.js";
import type { InboundDeps, InboundResult } from "./inbound-result.js";
import { handleDeduplicated } from "./message-dedup.js";

export type { InboundDeps, InboundResult } from "./inbound-result.js";

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
  return await handleDeduplicated({
    svc,
    msg,
    agentId,
    sessionKey,
    legacyKey: `${svc.keys.base}:${inboundMessageKey(msg, msg.messageId)}`,
    agentKey: `${svc.keys.base}:${inboundMessageKey(msg, msg.messageId, agentId)}`,
    handle: (runId) => handleResolved(svc, msg, agentId, sessionKey, runId),
  });
}

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

  // The entry's stored text too: a message that writes nothing is queued only if it is unchanged.
  let known = await svc.sessions.getKnown(sessionKey);
  let entry = known?.entry ?? null;
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
    // the policy would go on the retiring session and be lost with it. Also while a turn is
    // queued or running, as a message rolls it over: the archive job waits for the retired
    // sessionId's turns. A rollover lost to another one (the sessionId changed) leaves the
    // policy on the session as it now is.
    const stale = entry ? freshnessOf(config, entry, now, msg.channel) : undefined;
    const rolled =
      entry && stale && !stale.fresh
        ? await rotateSession(svc, entry, {
            reason: stale.staleReason ?? "daily",
            now,
            archive: "job",
            activity: "preserve",
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
    // Object.assign, not a spread: docs/development.md, "Copies on the hot path".
    const patch: SessionEntryPatch = Object.assign({}, meta, { updatedAt: at, resetAt: null });
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
      // A message that would change nothing but the session's activity, and that recently
      // (a DM's next message, mostly), writes nothing: it is queued only if the entry is still
      // exactly the one it was decided on (another message's new route meanwhile, a reset: decided
      // again on the current entry).
      const unwritten =
        known && !rotate && !trigger.triggered && onlyRecentActivity(config, known.entry, patch, at) ? known : null;
      const next = unwritten
        ? unwritten.entry
        : await svc.sessions.upsert(sessionKey, ident, patch, {
            now: at,
            staleAt: staleAtFor(config, sessionKey, at, msg.channel),
            ...(entry ? { expectSessionId: entry.sessionId } : { mode: "create" as const }),
            // The turn carries the archive; recorded too, in case it is never queued (a failed push).
            archiveRetired: rotate,
          });
      const turn: TurnRequest = {
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
      };
      // Queued only if the session is still the one just written: a reset from another gateway
      // in between retired it (and may be archiving it), so the message is decided again. And only
      // if its inbox is not full (gateway.limits.maxQueuedTurns): else 429 queue_full.
      const pushed = unwritten
        ? await enqueueTurnIfEntry(svc, turn, unwritten.raw, doorLimit(svc.config))
        : await enqueueTurnInSession(svc, turn, doorLimit(svc.config));
      if ("changed" in pushed) {
        // This attempt's own rotation retired the old sessionId: its archive goes by job now.
        if (rotate && entry)
          await enqueueArchive(svc, { sessionKey, agentId, sessionId: entry.sessionId, kind: "reset" });
        if (attempt >= MAX_ROTATION_RACES)
          throw new SwitchboardError("unavailable", "the session kept being reset while the message was queued");
        known = knownFrom(pushed.changed);
        entry = known?.entry ?? null;
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
        // Someone else rotated or created it first: re-evaluate.
        known = await svc.sessions.getKnown(sessionKey);
        entry = known?.entry ?? null;
        continue;
      }
      throw err;
    }
  }
}

/**
 * Whether writing `patch` (the message's metadata, its activity at `at`) would change nothing but
 * updatedAt, by less than the activity lag a turn may leave (activityEveryMs, as for the `agent`
 * RPC, src/rotation/turn-session.ts): the entry is then left as it is, and its updatedAt and stale
 * instant lag this message by at most that much. Not for a session reset since its last message
 * (`resetAt` set: the message must clear it) nor one whose metadata moved (another sender, route,
 * account or thread).
 */
function onlyRecentActivity(config: Config, entry: SessionEntry, patch: SessionEntryPatch, at: number): boolean {
  const { updatedAt: _activity, ...rest } = patch;
  if (at - entry.updatedAt >= activityEveryMs(entry, cachedStaleAt(config, entry))) return false;
  return patchChangesNothing(entry, rest);
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

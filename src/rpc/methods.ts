/**
 * The gateway RPC methods (README "HTTP API"). Pure service functions over `RpcDeps`, so the HTTP
 * gateway and the CLI's direct-to-Redis mode run the very same code. The methods that only read
 * are in read-methods.ts (they need no queues); this table includes them.
 */
export type { RpcHandler } from "./read-methods.js";
import { createHash, randomUUID } from "node:crypto";
import { freshRunSession } from "../rotation/isolated-run.js";
import { pruneOnce } from "../workers/session-prune.js";
import type { Logger } from "pino";
import type { ToolDeps } from "../tools/tool-deps.js";
import { defaultAgentId } from "../config/agents.js";
import {
  RunNotFoundError,
  SendBlockedError,
  SessionNotFoundError,
  SwitchboardError,
  ValidationError,
} from "../errors/index.js";
import { deleteSession, rotateSession } from "../rotation/rotate.js";
import { identOf } from "../session/session-ident.js";
import { doorLimit, enqueueTurnIfEntry, requestDrain } from "../runs/enqueue.js";
import { entryCache, knownEntry } from "../runs/entry-cache.js";
import { stopSessionAndSilence } from "../subagents/descendants.js";
import { replayAllDeadLetters, replayDeadLetter } from "../runs/replay.js";
import { uuidFrom } from "../runs/derived-id.js";
import { sessionForTurn } from "../rotation/turn-session.js";
import { ensureSessionForSend } from "../storage/ensure-session.js";
import { storedRoute } from "../session/stored-route.js";
import { isTerminal } from "../runs/turn.js";
import { canonicalSessionKey } from "../session/key-canonical.js";
import { sessionSendPolicy } from "../session/stored-send-policy.js";
import { enqueueDelivery, enqueueOrResumeDelivery } from "../delivery/deliver.js";
import * as P from "./params.js";
import { writeSessionSettings } from "../rotation/session-settings.js";
import { deploymentStatus } from "./status.js";
import { createReadRpcMethods, parseParams, type RpcHandler } from "./read-methods.js";

/** Pushes conditional on a cached session entry tried before pushing on a freshly read one. */
const MAX_ENTRY_RACES = 3;

/** The RPC methods act on everything the tools do (sessions, runs, transcripts, waits), and log. */
export interface RpcDeps extends ToolDeps {
  log: Logger;
}

export function createRpcMethods(svc: RpcDeps): Record<string, RpcHandler> {
  const canon = (key: string, agentId?: string) => canonicalSessionKey(svc.config, key, agentId ? { agentId } : {});

  // No prototype: the gateway looks methods up by a name from the URL, and `hasOwnProperty`,
  // `constructor` or `__proto__` must be unknown methods (404), not Object.prototype members.
  const methods: Record<string, RpcHandler> = {
    ...createReadRpcMethods(svc),
    "sessions.patch": async (raw) => {
      const p = parseParams(P.SessionsPatchParams, raw, "sessions.patch");
      const key = canon(p.key);
      const { key: _k, model, ...rest } = p;
      const patch = { ...rest, ...(model !== undefined ? { modelOverride: model } : {}) };
      // With the stale instant of the entry as the patch leaves it (src/rotation/session-settings.ts).
      const entry = await writeSessionSettings(svc, key, patch);
      return { key, entry };
    },

    "sessions.reset": async (raw) => {
      const p = parseParams(P.SessionsResetParams, raw, "sessions.reset");
      const key = canon(p.key);
      const old = await svc.sessions.get(key);
      if (!old) throw new SessionNotFoundError(key);
      const stopped = await stopSessionAndSilence(svc, key);
      // Activity, as OpenClaw's reset (a touch): updatedAt moves, so the session counts as used
      // now for pruning and list order too, not only for its idle/daily clock (resetAt).
      const next = await rotateSession(svc, old, { reason: p.reason ?? "reset", archive: "job", activity: "touch" });
      const entry = next ?? (await svc.sessions.require(key));
      return { key, sessionId: entry.sessionId, previousSessionId: old.sessionId, stopped, entry };
    },

    // session.maintenance on demand (OpenClaw's `sessions cleanup --dry-run|--enforce`).
    "sessions.cleanup": async (raw) => {
      const p = parseParams(P.SessionsCleanupParams, raw, "sessions.cleanup");
      if (!svc.config.session.maintenance) throw new ValidationError("session.maintenance is not configured");
      return await pruneOnce(svc, p.dryRun !== undefined ? { dryRun: p.dryRun } : {});
    },

    "sessions.delete": async (raw) => {
      const p = parseParams(P.SessionsDeleteParams, raw, "sessions.delete");
      const key = canon(p.key);
      const { agentId, kind } = identOf(svc.config, key);
      if (key === canon("main", agentId))
        throw new SwitchboardError("forbidden", `Cannot delete the main session (${key}); use sessions.reset`);
      const stopped = await stopSessionAndSilence(svc, key);
      const old = await deleteSession(svc, key, { agentId, kind }, { archive: p.deleteTranscript !== false });
      if (!old) throw new SessionNotFoundError(key);
      return { key, deleted: true, stopped };
    },

    agent: async (raw) => {
      const p = parseParams(P.AgentParams, raw, "agent");
      const agentId = p.agentId ?? defaultAgentId(svc.config);
      const key = canon(p.sessionKey ?? "main", agentId);
      // The entry comes from this gateway's cache when it has one; the push checks it is still
      // the stored one (one round trip for read and push), else answers with the current entry
      // and the turn is decided again on that.
      let known = await knownEntry(svc, key);
      for (let attempt = 1; ; attempt++) {
        // The policy is checked before the session is created, on null for one that does not
        // exist yet (as an inbound message is): a refused call leaves nothing behind. Checked
        // again on the entry created, which a concurrent caller may have written first.
        let entry = await ensureSessionForSend(svc, key, known?.entry ?? null);
        // A stale session rolls over and the turn counts as activity (at most one write a minute
        // per session); after a write the push cannot be conditional on the cached entry.
        const current = p.sessionTarget === "isolated" ? entry : await sessionForTurn(svc, entry);
        if (current !== entry) {
          entry = current;
          known = entryCache(svc).set(key, null); // the next call reads the entry just written
        }
        // An idempotency key maps to a fixed runId, so a retried call cannot start a second run:
        // the turn is queued once per runId, atomically with its run record (no separate claim,
        // which a gateway dying before the push would leave behind, acknowledging a lost turn).
        // Without one the push mints a new runId (so it can tell its own resent push from a duplicate).
        const runId = p.idempotencyKey ? uuidFrom(`${key}\n${p.idempotencyKey}`) : undefined;
        if (runId && (await svc.runs.get(runId))) {
          // The first call may have queued the turn and then failed to wake the drainer.
          await requestDrain(svc, key);
          return { runId, sessionKey: key, sessionId: entry.sessionId, duplicate: true };
        }
        // An isolated run rotates the session first: the push cannot be conditional on the old entry.
        const isolated = p.sessionTarget === "isolated";
        // With an idempotency key the new sessionId is derived too: a concurrent retry that also
        // got past the check above finds the session already rotated for this run.
        if (isolated) entry = await freshRunSession(svc, entry, runId ? uuidFrom(`${runId}\nsession`) : undefined);
        // deliver: the stored route, with explicit fields on top (another channel drops its `to`).
        // No route at all still gets its reply recorded (no_route on the "none" channel, as the
        // announce step records one), never dropped.
        const stored = storedRoute(key, entry);
        const base = !p.channel || p.channel === stored?.channel ? stored : undefined;
        const route = p.deliver
          ? {
              ...(base ?? {}),
              channel: p.channel || base?.channel || "none",
              ...(p.to ? { to: p.to } : {}),
              ...(p.accountId ? { accountId: p.accountId } : {}),
              ...(p.threadId !== undefined ? { threadId: String(p.threadId) } : {}),
            }
          : undefined;
        // A session that keeps changing under us (or was just created): push on the entry just
        // read, checking only that it was not reset meanwhile (then the turn follows the reset).
        const expect = known && !isolated && attempt <= MAX_ENTRY_RACES ? known.raw : undefined;
        const res = await enqueueTurnIfEntry(
          svc,
          {
            ...(runId ? { runId } : {}),
            sessionKey: key,
            agentId: entry.agentId,
            sessionId: entry.sessionId,
            text: p.message,
            step: "turn",
            provenance: "user",
            ...(route?.channel ? { deliver: route } : {}),
            ...(p.runTimeoutSeconds ? { runTimeoutSeconds: p.runTimeoutSeconds } : {}),
            ...(p.extraSystemPrompt ? { extraSystemPrompt: p.extraSystemPrompt } : {}),
          },
          expect,
          // A full inbox refuses the turn (429 queue_full); a resent idempotencyKey answered above.
          doorLimit(svc.config),
        );
        if ("changed" in res) {
          known = entryCache(svc).set(key, res.changed);
          continue;
        }
        return {
          runId: res.turn.runId,
          sessionKey: key,
          // The push follows a reset that landed after the read (enqueueTurnOnce).
          sessionId: res.turn.sessionId,
          ...(res.queued ? {} : { duplicate: true }),
        };
      }
    },

    "agent.wait": async (raw) => {
      const p = parseParams(P.AgentWaitParams, raw, "agent.wait");
      const { record, handedOver } = await svc.waiter().wait(p.runId, p.timeoutMs ?? 30_000);
      if (!record) throw new RunNotFoundError(p.runId);
      const done = isTerminal(record.status);
      // Never started and nobody to start it: say so instead of a bare timeout.
      const noWorker = !done && record.status === "queued" && (await nobodyConsumesRuns(svc));
      return {
        runId: p.runId,
        status: done ? record.status : "timeout",
        ...(done && record.reply !== undefined ? { reply: record.reply } : {}),
        ...(record.error ? { error: record.error } : {}),
        // Not done because storage refuses writes: say why instead of a bare timeout.
        ...(!done && record.stalledReason ? { error: record.stalledReason } : {}),
        ...(noWorker
          ? {
              error:
                "no worker is consuming the runs queue: the run waits until one starts " +
                "(switchboard worker, or switchboard start)",
            }
          : {}),
        // Answered early, not after timeoutMs: the client is to wait again, elsewhere.
        ...(!done && handedOver !== undefined
          ? { error: `${handedOver}: the run goes on; ask another gateway (agent.wait with this runId)` }
          : {}),
        ...(record.startedAt ? { startedAt: record.startedAt } : {}),
        ...(record.endedAt ? { endedAt: record.endedAt } : {}),
        ...(done ? {} : { runStatus: record.status }),
      };
    },

    send: async (raw) => {
      const p = parseParams(P.SendParams, raw, "send");
      const key = p.sessionKey ? canon(p.sessionKey) : `channel:${p.channel}`;
      // Refused here, not queued and then blocked: the policy for where it goes (the delivery
      // decides the same way).
      const entry = p.sessionKey ? await svc.sessions.get(key) : null;
      if (sessionSendPolicy(svc.config, key, entry, { channel: p.channel }) === "deny") throw new SendBlockedError(key);
      // The key names one send to one recipient: the same key for another session, channel or
      // recipient is another send (a global key silently swallowed the second one).
      const scope = [key, p.channel, p.to ?? "", p.accountId ?? "", String(p.threadId ?? ""), p.idempotencyKey];
      const id = p.idempotencyKey
        ? `send-${createHash("sha256").update(JSON.stringify(scope)).digest("hex").slice(0, 32)}`
        : `send-${randomUUID()}`;
      const data = {
        id,
        sessionKey: key,
        kind: "send",
        message: p.message,
        route: {
          channel: p.channel,
          ...(p.to ? { to: p.to } : {}),
          ...(p.accountId ? { accountId: p.accountId } : {}),
          ...(p.threadId !== undefined ? { threadId: String(p.threadId) } : {}),
        },
      };
      if (!p.idempotencyKey) {
        await enqueueDelivery(svc, data);
        return { id, status: "queued" };
      }
      // A resend answers what became of the first one; one that failed for good is tried again.
      return { id, ...(await enqueueOrResumeDelivery(svc, data)) };
    },

    "deadletters.replay": async (raw) => {
      const p = parseParams(P.DeadLettersReplayParams, raw, "deadletters.replay");
      if ("runId" in p) {
        const replayed = [{ runId: p.runId, ...(await replayDeadLetter(svc, p.runId)) }];
        return { count: 1, replayed };
      }
      const { replayed, refused } = await replayAllDeadLetters(svc);
      return { count: replayed.length, replayed, ...(refused.length ? { refused } : {}) };
    },

    "deadletters.discard": async (raw) => {
      const p = parseParams(P.DeadLetterRunParams, raw, "deadletters.discard");
      if (!(await svc.deadLetters.discard(p.runId)))
        throw new SwitchboardError("not_found", `No dead letter for run ${p.runId}`);
      return { runId: p.runId, discarded: true };
    },

    status: async (raw) => {
      parseParams(P.StatusParams, raw, "status");
      return await deploymentStatus(svc);
    },
  };
  return Object.assign(Object.create(null) as Record<string, RpcHandler>, methods);
}

/**
 * True only when Redis says no worker is connected to the runs queue. Asked only for a wait that
 * timed out on a run never started; an outage or a slow answer must not turn that timeout into
 * an error, so anything but a prompt 0 counts as "not known to be empty".
 */
async function nobodyConsumesRuns(svc: RpcDeps): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const late = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(-1), 500)));
    return (await Promise.race([svc.queues.runs.getWorkersCount(), late])) === 0;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

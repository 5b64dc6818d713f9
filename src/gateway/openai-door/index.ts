/**
 * The OpenAI-compatible door (docs/concepts/openai-door.md): `POST /v1/chat/completions` and
 * `GET /v1/models`, so any OpenAI SDK or chat UI talks to an agent session. Behind the same
 * auth, message limit, sendPolicy and per-session order as every other door; its answers and
 * errors are in OpenAI's shapes.
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import type { GatewayDeps } from "../gateway-deps.js";
import { assertMessageSize } from "../message-limit.js";
import { chatCompletion, chunk, completionIds, usageChunk, visibleReply } from "./completion.js";
import { DoorError, openAiError, openAiErrorHandler, reshapeErrorPayload } from "./errors.js";
import { REDIS_UNAVAILABLE_MESSAGE, redisFailure } from "../../errors/index.js";
import { clientGoneSignal } from "../client-gone.js";
import { agentForModel, modelChoice, modelIds } from "./model-alias.js";
import { parseChatCompletionRequest, turnInputOf } from "./request.js";
import { awaitTurn, doorRunId, startTurn, type TurnOutcome } from "./run-turn.js";
import {
  AGENT_ID_HEADERS,
  doorSessionKey,
  firstHeader,
  firstHeaderNamed,
  IDEMPOTENCY_KEY_HEADERS,
  SESSION_KEY_HEADERS,
  sessionAgentId,
} from "./session-key.js";
import { SseWriter } from "./sse.js";

/** Why a turn gave no reply, as an OpenAI error (status, body). */
function failureOf(
  outcome: TurnOutcome,
  runId: string,
  waitedSeconds: number,
): { status: number; body: ReturnType<typeof openAiError> } {
  const rec = outcome.record;
  if (!outcome.done) {
    const why = rec?.stalledReason ? ` (${rec.stalledReason})` : "";
    // Answered early, not after the wait the door allows: saying "after 600 s" would be false.
    const message =
      outcome.handedOver !== undefined
        ? `run ${runId} is still ${rec?.status ?? "queued"}${why}, but ${outcome.handedOver}; the run goes on: ` +
          `ask another gateway (GET /v1/runs/${runId})`
        : `run ${runId} is still ${rec?.status ?? "queued"} after ${waitedSeconds} s${why}; it goes on: ` +
          `GET /v1/runs/${runId}`;
    return { status: 504, body: openAiError(504, { code: "timeout", message, runId }) };
  }
  const status = rec!.status === "timeout" ? 504 : 500;
  const message = `run ${runId} ended ${rec!.status}${rec!.error ? `: ${rec!.error}` : ""}`;
  return { status, body: openAiError(status, { code: `run_${rec!.status}`, message, runId }) };
}

function modelList(svc: GatewayDeps, created: number) {
  return modelIds(svc.config).map((id) => ({ id, object: "model" as const, created, owned_by: "switchboard" }));
}

export async function registerOpenAiDoor(app: FastifyInstance, svc: GatewayDeps): Promise<void> {
  const cfg = svc.config.gateway.openai;
  if (!cfg.enabled) return;
  const created = Math.floor(Date.now() / 1000);
  const messageLimit = svc.config.gateway.limits.messageBytes;

  await app.register(async (door) => {
    door.setErrorHandler(openAiErrorHandler);
    door.addHook("onSend", reshapeErrorPayload);

    door.get("/v1/models", async () => ({ object: "list", data: modelList(svc, created) }));

    door.get<{ Params: { "*": string } }>("/v1/models/*", async (req) => {
      // Decoded by the router already (a second decode fails on `%25`, or reads `%2525` as `%`).
      const id = req.params["*"];
      const found = modelList(svc, created).find((m) => m.id === id);
      if (found) return found;
      // Any spelling the completions endpoint accepts names a model too.
      if (agentForModel(svc.config, id)) return { id, object: "model", created, owned_by: "switchboard" };
      throw new DoorError(
        "model_not_found",
        `The model '${id}' does not exist; GET /v1/models lists the agents`,
        "model",
      );
    });

    door.post("/v1/chat/completions", { bodyLimit: cfg.bodyBytes }, async (req, reply: FastifyReply) => {
      const body = parseChatCompletionRequest(req.body);
      const headerAgent = firstHeaderNamed(req.headers, AGENT_ID_HEADERS);
      const choice = modelChoice(svc.config, headerAgent?.value ?? body.model);
      if (!choice) {
        const what = headerAgent ? `agent '${headerAgent.value}'` : `model '${body.model}'`;
        throw new DoorError("model_not_found", `The ${what} does not exist; GET /v1/models lists the agents`, "model");
      }
      const agentId = choice.agentId;
      const input = turnInputOf(body);
      assertMessageSize(messageLimit, [{ field: input.field, text: input.text }]);
      const idempotencyKey = firstHeader(req.headers, IDEMPOTENCY_KEY_HEADERS);
      const headerKey = firstHeaderNamed(req.headers, SESSION_KEY_HEADERS);
      const sessionKey = doorSessionKey(svc.config, {
        agentId,
        agentFrom: headerAgent ? headerAgent.name : choice.named ? "model" : undefined,
        user: body.user,
        headerKey: headerKey?.value,
        headerName: headerKey?.name,
        idempotencyKey,
      });
      const runId = idempotencyKey ? doorRunId(sessionKey, idempotencyKey) : undefined;
      const turn = await startTurn(svc, sessionKey, input.text, input.systemPrompt, runId);
      // The agent that runs the turn is the one its session belongs to: a session-key header may
      // name another than the default one `model` stood for (a key of an unconfigured agent runs
      // on agents.defaults.runtime). The answer names the agent that ran, in the client's
      // spelling when its `model` names that agent.
      const ranAgent = sessionAgentId(svc.config, turn.sessionKey);
      const modelNamesRan = body.model && modelChoice(svc.config, body.model)?.agentId === ranAgent;
      const ids = completionIds(turn.runId, modelNamesRan ? body.model! : `switchboard/${ranAgent}`);
      // From here on the turn is queued, whatever the answer: OpenAI SDKs retry a 5xx (run error,
      // kill, timeout, Redis away while waiting) unless told not to, and a retry without an
      // Idempotency-Key would queue the turn again. OpenAI's own API sends this header too.
      const headers = {
        "x-switchboard-run-id": turn.runId,
        "x-switchboard-session-key": headerSafe(turn.sessionKey),
        "x-should-retry": "false",
      };

      // A client that goes away stops its wait at once (not the run): an unanswered wait would hold
      // a timer, a place on the run-done subscription and Redis reads until the run ends.
      const gone = clientGoneSignal(reply.raw);
      if (!body.stream) {
        // Set before the wait, so an error thrown by it (Redis away) is answered with them too.
        void reply.headers(headers);
        const outcome = await awaitTurn(svc, turn.runId, cfg.waitTimeoutSeconds * 1000, gone.signal).finally(
          gone.dispose,
        );
        if (outcome.done && outcome.record.status === "ok") return chatCompletion(ids, outcome.record);
        const failure = failureOf(outcome, turn.runId, cfg.waitTimeoutSeconds);
        return reply.status(failure.status).send(failure.body);
      }

      reply.hijack();
      const sse = new SseWriter(reply.raw, headers);
      sse.data(chunk(ids, { role: "assistant", content: "" }));
      let outcome: TurnOutcome;
      try {
        outcome = await awaitTurn(svc, turn.runId, cfg.waitTimeoutSeconds * 1000, gone.signal);
      } catch (err) {
        // Redis away (or full) while waiting: the stream is open, so the error travels as an event,
        // in the words every door uses (never Redis's own text, which names scripts and lines).
        const { code, message } = redisFailure(err) ?? { code: "unavailable", message: REDIS_UNAVAILABLE_MESSAGE };
        sse.data(openAiError(503, { code, message, runId: turn.runId }));
        sse.done();
        return;
      } finally {
        gone.dispose();
      }
      if (outcome.done && outcome.record.status === "ok") {
        // Runtimes hand over the whole reply when the turn ends: it arrives as one delta.
        const content = visibleReply(outcome.record);
        if (content) sse.data(chunk(ids, { content }));
        sse.data(chunk(ids, {}, "stop"));
        if (body.stream_options?.include_usage) sse.data(usageChunk(ids, outcome.record));
      } else {
        sse.data(failureOf(outcome, turn.runId, cfg.waitTimeoutSeconds).body);
      }
      sse.done();
    });
  });
}

/**
 * A key as a response header value: HTTP header values are bytes, and Node refuses characters
 * beyond latin1, so a key with non-ASCII text is sent percent-encoded (`café` → `caf%C3%A9`,
 * read back with decodeURIComponent); an ASCII key is sent as it is.
 */
function headerSafe(key: string): string {
  return /[^\x20-\x7e]/.test(key) ? key.replace(/[^\x20-\x7e]+/g, (run) => encodeURIComponent(run)) : key;
}

/**
 * The one source of truth for Switchboard's configuration: validation, TypeScript types and
 * defaults all come from these zod schemas. Every object is strict, so a misspelt key is an
 * error rather than a silently ignored setting. Defaults follow OpenClaw (docs/concepts/config.md).
 */
import { z } from "zod";
import { DEFAULT_MESSAGE_BYTES, MAX_MESSAGE_BYTES } from "../text/message-size.js";
import { wholeNumberId } from "../session/safe-text-schema.js";
import { SessionMaintenanceSchema } from "./openclaw-compat.js";
import { parseRedisUrl } from "./redis-url.js";

export const AGENT_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

const agentId = z.string().regex(AGENT_ID_PATTERN, "must match [a-z0-9][a-z0-9_-]{0,63}");

function isIanaTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const ResetPolicyConfigSchema = z.strictObject({
  mode: z.enum(["daily", "idle", "off"]).optional(),
  atHour: z.number().int().min(0).max(23).optional(),
  idleMinutes: z.number().int().min(0).optional(),
  timezone: z.string().refine(isIanaTimeZone, "unknown IANA time zone").optional(),
});

const ResetByTypeSchema = z.strictObject({
  dm: ResetPolicyConfigSchema.optional(),
  direct: ResetPolicyConfigSchema.optional(), // alias of dm, as OpenClaw accepts both
  group: ResetPolicyConfigSchema.optional(),
  thread: ResetPolicyConfigSchema.optional(),
});

const chatTypeInput = z.enum(["dm", "direct", "group", "channel"]);

export const SendPolicyRuleSchema = z.strictObject({
  action: z.enum(["allow", "deny"]),
  match: z
    .strictObject({
      channel: z.string().min(1).optional(),
      // OpenClaw compatibility: older configs name the channel `provider`.
      provider: z.string().min(1).optional(),
      chatType: chatTypeInput.optional(),
      keyPrefix: z.string().min(1).optional(),
      rawKeyPrefix: z.string().min(1).optional(),
    })
    .superRefine((m, ctx) => {
      if (m.provider !== undefined && m.channel !== undefined && m.provider.toLowerCase() !== m.channel.toLowerCase()) {
        ctx.addIssue({
          code: "custom",
          path: ["provider"],
          message: `alias of channel: conflicts with channel "${m.channel}"`,
        });
      }
    })
    .transform(({ provider, ...m }) =>
      provider !== undefined && m.channel === undefined ? { ...m, channel: provider } : m,
    )
    .optional(),
});

export const SendPolicyConfigSchema = z.strictObject({
  rules: z.array(SendPolicyRuleSchema).default([]),
  default: z.enum(["allow", "deny"]).default("allow"),
});

export const ScriptWhenSchema = z.strictObject({
  contains: z.string().optional(),
  regex: z
    .string()
    .refine((s) => {
      try {
        new RegExp(s);
        return true;
      } catch {
        return false;
      }
    }, "invalid regular expression")
    .optional(),
  provenance: z.enum(["user", "inter_session", "system"]).optional(),
  step: z.enum(["turn", "reply", "announce"]).optional(),
});

export const ScriptRuleSchema = z.strictObject({
  when: ScriptWhenSchema.optional(),
  delayMs: z.number().int().min(0).max(3_600_000).optional(),
  fail: z.string().optional(),
  tools: z
    .array(z.strictObject({ name: z.string().min(1), args: z.record(z.string(), z.unknown()).default({}) }))
    .optional(),
  reply: z.string().optional(),
  usage: z.strictObject({ input: z.number().int().min(0), output: z.number().int().min(0) }).optional(),
});

export const RuntimeConfigSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("echo") }),
  z.strictObject({ kind: z.literal("script"), rules: z.array(ScriptRuleSchema).default([]) }),
  z.strictObject({
    kind: z.literal("openai"),
    baseUrl: z.string().url(),
    model: z.string().min(1),
    apiKeyEnv: z.string().min(1).optional(),
    systemPrompt: z.string().optional(),
    temperature: z.number().min(0).max(2).optional(),
    maxToolRounds: z.number().int().min(0).max(32).default(8),
  }),
]);

// ---- Sub-agents (docs/concepts/subagents.md) -------------------------------------------------
const SubagentsConfigSchema = z.strictObject({
  maxSpawnDepth: z.number().int().min(1).max(5).default(1),
  maxChildrenPerAgent: z.number().int().min(1).max(20).default(5),
  /** Sub-agent runs at once across the whole deployment (BullMQ global concurrency). */
  maxConcurrent: z.number().int().min(1).default(8),
  allowAgents: z.array(z.string()).default([]),
  runTimeoutSeconds: z.number().int().min(0).default(0),
  /** How long a finished run stays in `subagents list` (0 = until its record expires). */
  archiveAfterMinutes: z.number().int().min(0).default(60),
  requireAgentId: z.boolean().default(false),
  model: z.string().min(1).max(200).optional(),
  thinking: z.string().min(1).max(32).optional(),
  /** Attempts of the durable announce job before it is parked as failed. */
  announceAttempts: z.number().int().min(1).max(50).default(6),
  announceBackoffMs: z.number().int().min(10).max(600_000).default(1000),
});

const AgentSubagentsConfigSchema = z.strictObject({
  allowAgents: z.array(z.string()).optional(),
  maxSpawnDepth: z.number().int().min(1).max(5).optional(),
  requireAgentId: z.boolean().optional(),
  model: z.string().min(1).max(200).optional(),
  thinking: z.string().min(1).max(32).optional(),
});

const ToolListSchema = z.array(z.string().min(1));
/** `tools.profile` / `alsoAllow` / `deny` and the sub-agent re-grants (`tools.subagents.tools`). */
const ToolProfileConfigFields = {
  profile: z.enum(["minimal", "messaging", "coding", "full"]).default("full"),
  alsoAllow: ToolListSchema.default([]),
  deny: ToolListSchema.default([]),
  subagents: z
    .strictObject({
      tools: z
        .strictObject({
          allow: ToolListSchema.optional(),
          alsoAllow: ToolListSchema.default([]),
          deny: ToolListSchema.default([]),
        })
        .prefault({}),
    })
    .prefault({}),
};
// ---- end sub-agents ----------------------------------------------------------------------------

const AgentEntrySchema = z.strictObject({
  id: agentId,
  name: z.string().optional(),
  default: z.boolean().optional(),
  sandboxed: z.boolean().optional(),
  runtime: RuntimeConfigSchema.optional(),
  subagents: AgentSubagentsConfigSchema.optional(),
  // OpenClaw compatibility, accepted and not acted on, as under agents.defaults (config/unused-keys.ts).
  model: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
  workspace: z.string().optional(),
});

// What fetch() accepts, checked here so a bad webhook is a config error at start-up rather than a
// delivery that fails after every retry: RFC 9110 token header names, and values without control
// characters (CR/LF would split the header) or characters outside Latin-1 (not a ByteString).
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

const WebhookUrlSchema = z.string().superRefine((url, ctx) => {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    // reported below
  }
  // The literal "://" too: WHATWG parsing forgives "http:/host/x", which is almost always a typo.
  // The URL is not echoed: webhook URLs often carry a secret token.
  if (!parsed || !/^https?:\/\/[^/]/i.test(url) || !parsed.hostname)
    ctx.addIssue({
      code: "custom",
      message: `must be an http:// or https:// URL with a host${parsed ? ` (got a ${parsed.protocol} URL)` : ""}`,
    });
});

export const ChannelConfigSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("webhook"),
    url: WebhookUrlSchema,
    headers: z
      .record(z.string(), z.string())
      // Checked per entry (not as the record's key schema), so the message names the header and
      // is not replaced by zod's generic "Invalid key in record".
      .superRefine((headers, ctx) => {
        for (const [name, value] of Object.entries(headers)) {
          if (!HEADER_NAME.test(name))
            ctx.addIssue({
              code: "custom",
              path: [name],
              message: "not a valid header name (letters, digits and !#$%&'*+-.^_`|~; no spaces or colons)",
            });
          else if (!HEADER_VALUE.test(value))
            ctx.addIssue({
              code: "custom",
              path: [name],
              message: "not a valid header value (no line breaks, other control characters or non-Latin-1 text)",
            });
        }
      })
      .optional(),
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  }),
  // Records the delivery as delivered without sending anywhere: demos, tests, dry runs.
  z.strictObject({ kind: z.literal("log") }),
]);

// ---------------------------------------------------------------------------------------------
// OpenClaw compatibility: `commands.*` (who may run owner-only chat commands such as `/send`).
// Only `ownerAllowFrom` is acted on; the other keys are accepted so an OpenClaw config starts,
// and are listed once at start-up as known-but-unused (see config/unused-keys.ts).
// ---------------------------------------------------------------------------------------------
export const CommandsConfigSchema = z.strictObject({
  /** Senders allowed to run owner commands: `channel:id` or a bare `id`. A `"*"` never matches. */
  // A number past 2^53 would already be rounded (Discord ids are 18 digits): refused, not matched
  // against the wrong sender.
  ownerAllowFrom: z
    .array(z.union([z.string().min(1), wholeNumberId("an ownerAllowFrom id")]).transform((id) => String(id)))
    .default([]),
  allowFrom: z
    .record(z.string(), z.array(z.union([z.string(), z.number()])))
    .or(z.array(z.union([z.string(), z.number()])))
    .optional(),
  native: z.union([z.boolean(), z.literal("auto")]).optional(),
  nativeSkills: z.union([z.boolean(), z.literal("auto")]).optional(),
  text: z.boolean().optional(),
  bash: z.boolean().optional(),
  bashForegroundMs: z.number().int().min(0).optional(),
  config: z.boolean().optional(),
  debug: z.boolean().optional(),
  restart: z.boolean().optional(),
  useAccessGroups: z.boolean().optional(),
});

// ---- Fields read by the cross-field checks (named: also checked on raw input, below) ----------
const GatewayHostSchema = z.string().min(1).default("127.0.0.1");
const GatewayPortSchema = z.number().int().min(0).max(65535).default(7420);
const MetricsPortSchema = z.number().int().min(0).max(65_535).optional();
const MetricsHostSchema = z.string().min(1).default("127.0.0.1");
/**
 * `gateway.auth.token` (also SWITCHBOARD_TOKEN and `--token`): only what an `Authorization: Bearer`
 * header can carry. Node reads header bytes as Latin-1, and a space ends the credential
 * (src/auth/credentials.ts), so any other token would be accepted here and then refuse every
 * request. The messages never echo the token.
 */
export const GatewayTokenSchema = z
  .string()
  .min(8, "use at least 8 characters")
  .regex(
    /^[\x21-\x7e]*$/,
    "use only visible ASCII characters (letters, digits, punctuation; no spaces or accented letters): " +
      "an Authorization: Bearer header cannot carry others",
  );
const MessageBytesSchema = z.number().int().min(1024).max(MAX_MESSAGE_BYTES).default(DEFAULT_MESSAGE_BYTES);
const DAY_MS = 86_400_000;
/**
 * How long a run record stays readable after it is written or finished (docs/concepts/limits.md):
 * the idempotency window. At least the longest run timeout (2 days), so a record outlives its run.
 */
const RunRecordTtlMsSchema = z
  .number()
  .int()
  .min(2 * DAY_MS)
  .max(366 * DAY_MS)
  .default(7 * DAY_MS);
const FaultDeadlineMinutesSchema = z
  .number()
  .min(0)
  .max(7 * 24 * 60)
  .default(60);
const BodyBytesSchema = z
  .number()
  .int()
  .min(1024)
  .max(4 * MAX_MESSAGE_BYTES)
  .optional();
const OpenAIBodyBytesSchema = z
  .number()
  .int()
  .min(1024)
  .max(256 * 1024 * 1024)
  .default(16 * 1024 * 1024);

/** What the cross-field checks read; `undefined` where that value is itself invalid (check skipped). */
interface CrossFieldView {
  host: string | undefined;
  port: number | undefined;
  metricsHost: string | undefined;
  metricsPort: number | undefined;
  token: unknown;
  messageBytes: number | undefined;
  bodyBytes: number | undefined;
  openaiBodyBytes: number | undefined;
  runRecordTtlMs: number | undefined;
  faultDeadlineMinutes: number | undefined;
  /** One per `agents.list` entry; `undefined` for an entry without a usable id. */
  agentIds: (string | undefined)[];
}

interface CrossFieldIssue {
  path: (string | number)[];
  message: string;
}

const LOOPBACK = ["127.0.0.1", "localhost", "::1"];
const WILDCARD = ["0.0.0.0", "::", "[::]"];

/** Whether listening on both hosts (same port) would collide: the same, loopback twice, or a wildcard. */
function sameListenAddress(a: string, b: string): boolean {
  return a === b || WILDCARD.includes(a) || WILDCARD.includes(b) || (LOOPBACK.includes(a) && LOOPBACK.includes(b));
}

/** The checks no single field can make (the schema's superRefine, and on raw input, below). */
function crossFieldIssues(v: CrossFieldView): CrossFieldIssue[] {
  const out: CrossFieldIssue[] = [];
  if (v.host !== undefined && !["127.0.0.1", "localhost", "::1"].includes(v.host) && !v.token) {
    out.push({
      path: ["gateway", "auth", "token"],
      message: `required when gateway.host (${v.host}) is not loopback`,
    });
  }
  if (v.port && v.port === v.metricsPort && v.host !== undefined && v.metricsHost !== undefined) {
    if (sameListenAddress(v.host, v.metricsHost))
      out.push({
        path: ["workers", "metricsPort"],
        message: `must differ from gateway.port (${v.port}): \`start\` would listen on it twice`,
      });
  }
  const { messageBytes, bodyBytes, openaiBodyBytes } = v;
  if (messageBytes !== undefined && bodyBytes !== undefined && bodyBytes < messageBytes) {
    out.push({ path: ["gateway", "limits", "bodyBytes"], message: `must be at least messageBytes (${messageBytes})` });
  }
  if (messageBytes !== undefined && openaiBodyBytes !== undefined && openaiBodyBytes < messageBytes) {
    out.push({
      path: ["gateway", "openai", "bodyBytes"],
      message: `must be at least gateway.limits.messageBytes (${messageBytes})`,
    });
  }
  const { runRecordTtlMs, faultDeadlineMinutes } = v;
  if (
    runRecordTtlMs !== undefined &&
    faultDeadlineMinutes !== undefined &&
    runRecordTtlMs < faultDeadlineMinutes * 60_000
  ) {
    out.push({
      path: ["maintenance", "runRecordTtlMs"],
      message:
        `must be at least storage.faultDeadlineMinutes (${faultDeadlineMinutes} min): ` +
        "a turn parked on a storage fault keeps its run record until it is given up",
    });
  }
  const seen = new Set<string>();
  v.agentIds.forEach((id, i) => {
    if (id === undefined) return;
    if (seen.has(id)) out.push({ path: ["agents", "list", i, "id"], message: `duplicate agent id "${id}"` });
    seen.add(id);
  });
  return out;
}

/**
 * The cross-field checks on raw input, for a config the schema rejected: zod skips the
 * superRefine once a field fails, and `config validate` must still list every problem. Each value
 * is validated alone (defaults applied); a check whose inputs are invalid is skipped.
 */
export function rawCrossFieldIssues(input: unknown): CrossFieldIssue[] {
  const obj = (v: unknown): Record<string, unknown> =>
    v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  const field = <T>(schema: z.ZodType<T>, value: unknown): T | undefined => {
    const r = schema.safeParse(value);
    return r.success ? r.data : undefined;
  };
  const gateway = obj(obj(input).gateway);
  const workers = obj(obj(input).workers);
  const list = obj(obj(input).agents).list;
  const maintenance = obj(obj(input).maintenance);
  const storage = obj(obj(input).storage);
  return crossFieldIssues({
    host: field(GatewayHostSchema, gateway.host),
    port: field(GatewayPortSchema, gateway.port),
    metricsHost: field(MetricsHostSchema, workers.metricsHost),
    metricsPort: field(MetricsPortSchema, workers.metricsPort),
    token: obj(gateway.auth).token,
    messageBytes: field(MessageBytesSchema, obj(gateway.limits).messageBytes),
    bodyBytes: field(BodyBytesSchema, obj(gateway.limits).bodyBytes),
    openaiBodyBytes: field(OpenAIBodyBytesSchema, obj(gateway.openai).bodyBytes),
    runRecordTtlMs: field(RunRecordTtlMsSchema, maintenance.runRecordTtlMs),
    faultDeadlineMinutes: field(FaultDeadlineMinutesSchema, storage.faultDeadlineMinutes),
    agentIds: Array.isArray(list) ? list.map((a) => field(agentId, obj(a).id)) : [],
  });
}

export const ConfigSchema = z
  .strictObject({
    redis: z
      .strictObject({
        // One Redis (redis://, rediss://) or a Redis Cluster by its seed nodes
        // (redis+cluster://host:port,host:port); see docs/concepts/redis-cluster.md.
        url: z
          .string()
          .superRefine((url, ctx) => {
            try {
              parseRedisUrl(url);
            } catch (err) {
              ctx.addIssue({ code: "custom", message: (err as Error).message });
            }
          })
          .default("redis://127.0.0.1:6379"),
        prefix: z
          .string()
          .regex(/^[A-Za-z0-9_.-]{1,32}$/, "letters, digits, _ . - (1-32 chars); the hash tag is added for you")
          .default("sb"),
      })
      .prefault({}),
    storage: z
      .strictObject({
        dir: z.string().min(1).default("~/.switchboard"),
        // While transcript storage refuses writes (EACCES, ENOSPC, EIO, ESTALE…) a turn is parked
        // and retried, not failed: only after this long is it failed and dead-lettered.
        faultDeadlineMinutes: FaultDeadlineMinutesSchema,
        // Longest pause between retries of a parked turn (they start at 1 s and double).
        faultRetryMaxDelayMs: z.number().int().min(100).max(600_000).default(30_000),
        // Transcript durability, named like Redis's appendfsync: "always" fsyncs before a turn is
        // finished; "everysec" fsyncs each written file once a second (group commit). A killed
        // worker loses nothing either way; a power loss may lose the last second under everysec.
        fsync: z.enum(["always", "everysec"]).default("everysec"),
      })
      .prefault({}),
    gateway: z
      .strictObject({
        // OpenClaw compatibility, accepted and not acted on (config/unused-keys.ts): how OpenClaw's
        // gateway ran and which interfaces it bound; Switchboard binds `gateway.host`.
        mode: z.string().optional(),
        bind: z.string().optional(),
        host: GatewayHostSchema,
        port: GatewayPortSchema,
        auth: z.strictObject({ token: GatewayTokenSchema.optional() }).prefault({}),
        // One message size limit for every door (docs/concepts/limits.md).
        limits: z
          .strictObject({
            messageBytes: MessageBytesSchema,
            // Default: 2 × messageBytes + 64 KiB (envelope and JSON escaping).
            bodyBytes: BodyBytesSchema,
            // How far an inbound message's timestamp may run ahead of the gateway's clock and still
            // count for its session's lifecycle (src/inbound/handle-inbound.ts, lifecycleTime).
            timestampAheadMs: z
              .number()
              .int()
              .min(0)
              .max(10 * 366 * 86_400_000)
              .default(5 * 60_000),
            // How many turns a session's inbox may hold before a door's new turn is refused (429
            // queue_full); 0: no limit. Internal turns are always queued (docs/concepts/limits.md).
            maxQueuedTurns: z.number().int().min(0).max(1_000_000).default(1000),
            // How many bytes (UTF-8, the stored turns) a session's inbox may hold before a door's new
            // turn is refused the same way; 0: no limit. A turn into an empty inbox is always queued.
            maxQueuedBytes: z
              .number()
              .int()
              .min(0)
              .max(2 ** 40)
              .default(64 * 1024 * 1024),
            // How many commands a gateway may have waiting on Redis (sent and not answered: a hung or
            // partitioned Redis) before it refuses requests that need Redis with 503 unavailable and
            // /readyz says not ready; 0: no limit (src/gateway/redis-backlog.ts, docs/concepts/limits.md).
            maxPendingRedisCommands: z.number().int().min(0).max(1_000_000).default(1000),
            // The same for the bytes of commands its socket has not taken yet (big messages); 0: no limit.
            maxPendingRedisBytes: z
              .number()
              .int()
              .min(0)
              .max(2 ** 40)
              .default(64 * 1024 * 1024),
          })
          .prefault({}),
        // The OpenAI-compatible door: POST /v1/chat/completions, GET /v1/models (docs/concepts/openai-door.md).
        openai: z
          .strictObject({
            enabled: z.boolean().default(true),
            // How long a request waits for the turn before answering 504 (the turn goes on).
            waitTimeoutSeconds: z.number().int().min(1).max(3600).default(600),
            // OpenAI clients resend the whole conversation on every call: their bodies get more room.
            bodyBytes: OpenAIBodyBytesSchema,
          })
          .prefault({}),
      })
      .prefault({}),
    workers: z
      .strictObject({
        concurrency: z.number().int().min(1).max(1000).default(16),
        // How a turn pushed into an idle session wakes a drainer (docs/design/runs.md): "ready-list"
        // puts the session on a list workers block on (no BullMQ job, fewest round trips);
        // "drain-job" adds a BullMQ drain job, so every drain shows in Bull Board. Read by every
        // process that queues turns (gateways and workers); workers consume the list either way.
        wake: z.enum(["ready-list", "drain-job"]).default("ready-list"),
        // How long a worker may go silent before its job (and session lease) is taken over.
        lockDurationMs: z.number().int().min(1000).max(600_000).default(30_000),
        stalledIntervalMs: z.number().int().min(1000).max(600_000).default(30_000),
        deliveryAttempts: z.number().int().min(1).max(50).default(5),
        deliveryBackoffMs: z.number().int().min(10).max(600_000).default(1000),
        // A chat's first undelivered message holds the ones behind it (docs/concepts/reliability.md,
        // "Replies reach a chat in order"); when its job has not been seen for this long, the ones
        // behind look whether that job still exists, and pass it if not.
        deliveryOrphanAfterMs: z.number().int().min(100).max(3_600_000).default(10_000),
        // On SIGTERM, how long running turns may finish before they are handed back to other workers.
        shutdownGraceMs: z.number().int().min(0).max(600_000).default(25_000),
        // A drain that ran out of retries (Redis away for long) is tried again this much later, so
        // the turns still in its session's inbox are not stranded until the next message.
        rearmDrainDelayMs: z.number().int().min(0).max(600_000).default(5000),
        // A worker process serves its own Prometheus metrics here (0: a port the OS picks); off when unset.
        metricsPort: MetricsPortSchema,
        metricsHost: MetricsHostSchema,
      })
      .prefault({}),
    // The Redis-wide registry of running processes (docs/concepts/deployment-identity.md).
    deployment: z
      .strictObject({
        // A process's record lives this long after its last heartbeat (sent every third of it):
        // how soon a killed process disappears from the registry, doctor and start-up banners.
        registryTtlMs: z.number().int().min(3000).max(600_000).default(15_000),
      })
      .prefault({}),
    maintenance: z
      .strictObject({
        sweepEveryMs: z.number().int().min(1000).default(60_000),
        sweepBatch: z.number().int().min(1).max(10_000).default(500),
        // How long run records (and what lives as long: the sub-agent registry, sessions_send's
        // late flags) stay in Redis after their last write: the idempotency window of
        // `idempotencyKey` and derived runIds, and most of Redis's memory (docs/concepts/limits.md).
        runRecordTtlMs: RunRecordTtlMsSchema,
      })
      .prefault({}),
    session: z
      .strictObject({
        scope: z.enum(["per-sender", "global"]).default("per-sender"),
        dmScope: z.enum(["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]).default("main"),
        mainKey: z
          .string()
          .trim()
          .toLowerCase()
          .regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, "letters, digits, _ . - (no ':')")
          .default("main"),
        identityLinks: z.record(z.string(), z.array(z.string())).default({}),
        reset: ResetPolicyConfigSchema.optional(),
        resetByType: ResetByTypeSchema.optional(),
        resetByChannel: z.record(z.string(), ResetPolicyConfigSchema).optional(),
        idleMinutes: z.number().int().min(0).optional(),
        resetTriggers: z.array(z.string().min(1)).default(["/new", "/reset"]),
        sendPolicy: SendPolicyConfigSchema.optional(),
        // OpenClaw compatibility (config/openclaw-compat.ts): accepted so OpenClaw configs start.
        // `store` is the default source of `switchboard import openclaw`; nothing else reads it.
        store: z.string().min(1).optional(),
        maintenance: SessionMaintenanceSchema.optional(),
        parentForkMaxTokens: z.number().int().min(0).optional(),
        agentToAgent: z
          .strictObject({
            maxPingPongTurns: z.number().int().min(0).max(5).default(5),
            // Switchboard addition: bounds send chains across any number of agents (A→B→C→A…).
            maxHops: z.number().int().min(1).max(100).default(10),
          })
          .prefault({}),
      })
      .prefault({}),
    tools: z
      .strictObject({
        sessions: z.strictObject({ visibility: z.enum(["self", "tree", "agent", "all"]).default("tree") }).prefault({}),
        agentToAgent: z
          .strictObject({ enabled: z.boolean().default(false), allow: z.array(z.string()).default([]) })
          .prefault({}),
        ...ToolProfileConfigFields,
      })
      .prefault({}),
    agents: z
      .strictObject({
        defaults: z
          .strictObject({
            runtime: RuntimeConfigSchema.default({ kind: "echo" }),
            sandbox: z
              .strictObject({ sessionToolsVisibility: z.enum(["spawned", "all"]).default("spawned") })
              .prefault({}),
            subagents: SubagentsConfigSchema.prefault({}),
            // OpenClaw compatibility: the model catalog `/new <model>` chooses from
            // (`"provider/model": { alias? }`), as OpenClaw's agents.defaults.models.
            models: z
              .record(
                z.string().min(1, 'a model is named "provider/model", not empty'),
                z.strictObject({ alias: z.string().min(1).optional() }).prefault({}),
              )
              .default({}),
            // OpenClaw compatibility, accepted and not acted on (config/unused-keys.ts): OpenClaw's
            // default model and its agents' workspace dir; a runtime says what answers here.
            model: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
            workspace: z.string().optional(),
          })
          .prefault({}),
        list: z.array(AgentEntrySchema).default([]),
      })
      .prefault({}),
    channels: z
      .record(
        z
          .string()
          .regex(
            /^[a-z0-9][a-z0-9_-]{0,63}$/,
            "a channel id is 1-64 lowercase letters, digits, _ and - (starting with a letter or digit)",
          ),
        ChannelConfigSchema,
      )
      .default({}),
    // OpenClaw compatibility block (see CommandsConfigSchema).
    commands: CommandsConfigSchema.prefault({}),
    // OpenClaw compatibility, accepted and not acted on (config/unused-keys.ts): OpenClaw's model
    // providers. Switchboard's agents answer through their `runtime`.
    models: z.record(z.string(), z.unknown()).optional(),
    // Conformance: secrets are masked before a transcript line is written (opt out: false).
    transcripts: z.strictObject({ redactSecrets: z.boolean().default(true) }).prefault({}),
  })
  .superRefine((cfg, ctx) => {
    const view: CrossFieldView = {
      host: cfg.gateway.host,
      port: cfg.gateway.port,
      metricsHost: cfg.workers.metricsHost,
      metricsPort: cfg.workers.metricsPort,
      token: cfg.gateway.auth.token,
      messageBytes: cfg.gateway.limits.messageBytes,
      bodyBytes: cfg.gateway.limits.bodyBytes,
      openaiBodyBytes: cfg.gateway.openai.bodyBytes,
      runRecordTtlMs: cfg.maintenance.runRecordTtlMs,
      faultDeadlineMinutes: cfg.storage.faultDeadlineMinutes,
      agentIds: cfg.agents.list.map((a) => a.id),
    };
    for (const issue of crossFieldIssues(view)) ctx.addIssue({ code: "custom", ...issue });
  });

export type Config = z.output<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;
export type ResetPolicyConfig = z.output<typeof ResetPolicyConfigSchema>;
export type RuntimeConfig = z.output<typeof RuntimeConfigSchema>;
export type ScriptRule = z.output<typeof ScriptRuleSchema>;
export type ChannelConfig = z.output<typeof ChannelConfigSchema>;
export type AgentEntry = Config["agents"]["list"][number];

/**
 * The jobs table (src/queues/jobs.ts): every producer adds through it and every processor reads
 * through it, so its schemas must refuse bad data and its options must be what BullMQ stores.
 */
import { UnrecoverableError, type Job } from "bullmq";
import { afterAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import {
  InvalidJobDataError,
  JOBS,
  addJob,
  continuationOf,
  jobData,
  jobKindByName,
  queueOf,
  subagentAnnounceJobId,
  type JobKind,
} from "../../src/queues/jobs.js";
import { QUEUE_NAMES, closeQueues, createQueues, type Queues } from "../../src/queues/index.js";
import { RedisKeys } from "../../src/storage/redis-keys.js";
import { testConfig, testRedisUrl } from "../helpers/context.js";

const config = testConfig({ workers: { deliveryAttempts: 7, deliveryBackoffMs: 250 } });
const a2aState = {
  requesterKey: "agent:main:main",
  targetKey: "agent:main:other",
  requesterAgent: "main",
  targetAgent: "main",
  original: "hi",
  turn: 0,
  maxTurns: 5,
  phase: "after-primary",
  hop: 1,
  traceId: "t-1",
  primaryRunId: "run-1",
};

describe("the jobs table", () => {
  it("names each job once and sends it to a known queue", () => {
    const names = Object.values(JOBS).map((j) => j.name);
    expect(new Set(names).size).toBe(names.length);
    for (const kind of Object.keys(JOBS) as JobKind[]) {
      expect(jobKindByName(JOBS[kind].name)).toBe(kind);
      const q = JOBS[kind].queue;
      if (typeof q === "string") expect(QUEUE_NAMES).toContain(q);
    }
    expect(queueOf("drain", { sessionKey: "agent:main:main" })).toBe("runs");
    expect(queueOf("drain", { sessionKey: "agent:main:subagent:abc" })).toBe("subagents");
  });

  it.each([
    ["drain", {}],
    ["drain", { sessionKey: "" }],
    ["drain", { sessionKey: "k", leaseWaits: -1 }],
    ["deliver", { id: "d", sessionKey: "k", route: {}, message: "m", kind: "reply" }],
    ["deliver", { id: "d", sessionKey: "k", route: { channel: "tg" }, message: 42, kind: "reply" }],
    ["archive", { sessionKey: "k", agentId: "main", sessionId: "s", kind: "renamed" }],
    ["a2aStep", { ...a2aState, runId: "r", reply: "x", phase: "after-lunch" }],
    ["a2aStep", { ...a2aState, runId: "r" }],
    ["subagentAnnounce", { childKey: "c", runId: "r", status: "finished" }],
    ["subagentArchive", { runId: 5 }],
  ] as [JobKind, unknown][])("%s refuses %j", async (kind, data) => {
    // Refused before any queue is touched.
    await expect(addJob({ queues: {} as Queues, config }, kind, data as never)).rejects.toBeInstanceOf(
      InvalidJobDataError,
    );
    expect(() => jobData(kind, { data } as Job)).toThrow(UnrecoverableError);
  });

  it("accepts what the producers add", () => {
    expect(jobData("a2aStep", { data: { ...a2aState, runId: "r", reply: "", status: "ok" } } as Job).phase).toBe(
      "after-primary",
    );
    expect(
      jobData("subagentAnnounce", {
        data: { childKey: "c", runId: "r", reply: "", status: "killed", error: "stopped" },
      } as Job).status,
    ).toBe("killed");
  });
});

describe("addJob on BullMQ", () => {
  const connection = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const keys = new RedisKeys(config.redis.prefix);
  const queues = createQueues(connection, keys);
  const svc = { queues, config };
  afterAll(async () => {
    await Promise.all(Object.values(queues).map((q) => q.obliterate({ force: true }).catch(() => undefined)));
    await closeQueues(queues);
    connection.disconnect();
  });

  it("stores the table's id rule, retries and queue", async () => {
    const delivery = await addJob(svc, "deliver", {
      id: "reply:r/1",
      sessionKey: "agent:main:main",
      route: { channel: "tg", to: "42" },
      message: "hi",
      kind: "reply",
    });
    expect(delivery.id).toBe("reply_r_1");
    expect(delivery.queueName).toBe("delivery");
    expect(delivery.opts.attempts).toBe(7);
    expect(delivery.opts.backoff).toEqual({ type: "exponential", delay: 250 });
    // Added again (a retried producer): the same job, not a second one.
    await addJob(svc, "deliver", {
      id: "reply:r/1",
      sessionKey: "agent:main:main",
      route: { channel: "tg" },
      message: "hi",
      kind: "reply",
    });
    expect(await queues.delivery.getJobCountByTypes("waiting", "delayed")).toBe(1);

    const drain = await addJob(svc, "drain", { sessionKey: "agent:main:subagent:x" }, { delay: 1000 });
    expect(drain.queueName).toBe("subagents");
    expect(drain.opts.deduplication).toMatchObject({ id: "agent:main:subagent:x", keepLastIfActive: true });
    expect(drain.opts.delay).toBe(1000);
  });

  it("builds continuations that add the same job the table would", async () => {
    const c = continuationOf("subagentAnnounce", "run-9", { childKey: "agent:main:subagent:c" }, config);
    expect(c).toMatchObject({
      queue: "announce",
      name: "subagent.announce",
      jobId: subagentAnnounceJobId("agent:main:subagent:c", "run-9"),
    });
    expect(c.attempts).toBe(config.agents.defaults.subagents.announceAttempts);
    const job = await addJob(svc, "subagentAnnounce", {
      ...(c.data as { childKey: string }),
      runId: "run-9",
      reply: "",
      status: "ok",
    });
    expect(job.id).toBe(c.jobId);
    const step = continuationOf("a2aStep", "run-10", a2aState, config);
    expect(step).toMatchObject({
      queue: "announce",
      name: "a2a.step",
      jobId: "cont-run-10",
      attempts: 10,
      backoffMs: 500,
    });
  });
});

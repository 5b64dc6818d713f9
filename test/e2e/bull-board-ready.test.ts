/**
 * The ready list in Bull Board, in a real headless Chromium: drains woken from the ready list are
 * not BullMQ jobs, so the board shows them as the read-only `ready` queue: sessions woken and not
 * yet taken (waiting), sessions a drain has (active), and the dead letters (failed), with the
 * ready-list consumers as its workers. The states are made for real: a gateway with no worker
 * readies sessions; a worker gives up a turn that can never run; a slow turn holds its session.
 */
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueTurn } from "../../src/runs/enqueue.js";
import { waitRunning } from "../helpers/api.js";
import { ROOT, startPeer, startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { openBoardBrowser, type BoardBrowser } from "../helpers/board-browser.js";

const TOKEN = "ready-board-token";
const SCREENSHOT = join(ROOT, "test-results/bull-board-ready.png");

interface BoardJob {
  id: string;
  name: string;
  timestamp: number;
  failedReason?: string;
  data: Record<string, unknown>;
}
interface BoardQueue {
  name: string;
  counts: Record<string, number>;
  jobs: BoardJob[];
  readOnlyMode: boolean;
  hasWorkers: boolean | null;
}

let gateway: TestSystem;
let workers: TestSystem | undefined;
let board: BoardBrowser | undefined;
let page: Page;
let deadRunId = "";
const waitingRunIds: string[] = [];

/** The board's own data call for the ready queue, from inside the page (its session and auth). */
async function readyQueue(status: string): Promise<BoardQueue> {
  const url = `/admin/queues/api/queues?activeQueue=ready&status=${status}&page=1&jobsPerPage=50`;
  const api = (await page.evaluate(async (u) => (await fetch(u)).json(), url)) as { queues: BoardQueue[] };
  return api.queues.find((q) => q.name === "ready")!;
}

beforeAll(async () => {
  // A gateway alone: what it readies stays on the ready list until a worker starts.
  gateway = await startTestSystem(
    {
      gateway: { auth: { token: TOKEN } },
      // The slow turn is cut short when the test's worker stops.
      workers: { shutdownGraceMs: 200 },
      agents: {
        defaults: {
          runtime: {
            kind: "script",
            rules: [{ when: { regex: "^slow" }, delayMs: 60_000, reply: "slow" }, { reply: "echo: {{text}}" }],
          },
        },
      },
    },
    { gateway: true, workers: false },
  );

  // A dead letter, made for real: a turn whose sessionId is no safe file name, run by a worker.
  workers = await startPeer(gateway.config, { gateway: false, workers: {} });
  const doomed = await enqueueTurn(gateway.svc, {
    sessionKey: "agent:main:dm:doomed",
    agentId: "main",
    sessionId: "../../escape",
    text: "please keep me",
    step: "turn",
    provenance: "user",
  });
  deadRunId = doomed.runId;
  expect(await gateway.rpc("agent.wait", { runId: deadRunId, timeoutMs: 15_000 })).toMatchObject({ status: "error" });
  await workers.close();
  workers = undefined;

  board = await openBoardBrowser(TOKEN);
  page = board.page;
}, 60_000);

afterAll(async () => {
  await board?.close();
  await workers?.close();
  await gateway?.close();
});

describe("the ready list in Bull Board (headless Chromium)", () => {
  it("lists sessions woken with no worker as waiting, oldest first, with no workers shown", async () => {
    for (const peer of ["ann", "bob", "cid"]) {
      const accepted = await gateway.rpc("agent", { sessionKey: `board-${peer}`, message: `hello from ${peer}` });
      waitingRunIds.push(accepted.runId);
    }
    const res = await page.goto(`${gateway.url}/admin/queues/queue/ready?status=waiting`, {
      waitUntil: "networkidle",
    });
    expect(res?.status()).toBe(200);
    const ready = await readyQueue("waiting");
    expect(ready.readOnlyMode).toBe(true);
    expect(ready.counts.waiting).toBe(3);
    expect(ready.jobs.map((j) => j.id)).toEqual(waitingRunIds);
    expect(ready.jobs.map((j) => j.name)).toEqual(
      ["board-ann", "board-bob", "board-cid"].map((k) => `agent:main:${k}`),
    );
    expect(ready.jobs.every((j) => j.timestamp > 0)).toBe(true);
    expect(ready.hasWorkers).toBe(false);
    // Each waiting session is a card on the page, linking to its entry.
    for (const runId of waitingRunIds) {
      const card = page.locator(`a[href="/admin/queues/queue/ready/${runId}?status=waiting"]`);
      await expect
        .poll(async () => await card.count(), { timeout: 15_000, message: `card ${runId}` })
        .toBeGreaterThan(0);
    }
    mkdirSync(join(ROOT, "test-results"), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(readFileSync(SCREENSHOT).length).toBeGreaterThan(10_000); // a rendered board, not a blank page
    if (process.env.UPDATE_DOCS_SCREENSHOTS === "1")
      copyFileSync(SCREENSHOT, join(ROOT, "docs/images/bull-board-ready.png"));
  });

  it("shows the dead letter as failed, with its reason and message", async () => {
    const ready = await readyQueue("failed");
    expect(ready.counts.failed).toBe(1);
    const letter = ready.jobs.find((j) => j.id === deadRunId)!;
    expect(letter).toMatchObject({ name: "agent:main:dm:doomed" });
    expect(letter.failedReason).toMatch(/^permanent: cannot run this turn/);
    expect(letter.data).toMatchObject({ text: "please keep me" });
    await page.goto(`${gateway.url}/admin/queues/queue/ready?status=failed`, { waitUntil: "networkidle" });
    await expect
      .poll(async () => await page.getByText(/cannot run this turn/).count(), { timeout: 15_000 })
      .toBeGreaterThan(0);
    await page.screenshot({ path: join(ROOT, "test-results/bull-board-ready-failed.png"), fullPage: true });
    // The "latest" tab: every state at once, newest first.
    const latest = await readyQueue("latest");
    expect(latest.jobs.map((j) => j.id).sort()).toEqual([...waitingRunIds, deadRunId].sort());
    const times = latest.jobs.map((j) => j.timestamp);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("opens an entry's page by its runId, in the state it is in", async () => {
    const job = async (id: string) =>
      (await page.evaluate(async (u) => (await fetch(u)).json(), `/admin/queues/api/queues/ready/${id}`)) as {
        job: BoardJob;
        status: string;
      };
    expect(await job(waitingRunIds[0]!)).toMatchObject({
      status: "waiting",
      job: { id: waitingRunIds[0], name: "agent:main:board-ann" },
    });
    expect(await job(deadRunId)).toMatchObject({ status: "failed", job: { id: deadRunId } });
    const res = await page.goto(`${gateway.url}/admin/queues/queue/ready/${deadRunId}?status=failed`, {
      waitUntil: "networkidle",
    });
    expect(res?.status()).toBe(200);
    await expect
      .poll(async () => await page.getByText(/cannot run this turn/).count(), { timeout: 15_000 })
      .toBeGreaterThan(0);
  });

  it("refuses changes through the board's API (read-only: entries are wake-ups, not jobs)", async () => {
    const put = async (path: string) =>
      await page.evaluate(
        async (u) => (await fetch(u, { method: "PUT" })).status,
        `/admin/queues/api/queues/ready/${path}`,
      );
    expect(await put(`${deadRunId}/retry`)).toBe(405);
    expect(await put("retry/failed")).toBe(405);
    expect(await put("pause")).toBe(405);
    expect(await gateway.svc.deadLetters.get(deadRunId)).not.toBeNull();
    expect(await gateway.svc.redis.llen(gateway.svc.keys.readyList())).toBe(3);
  });

  it("once a worker starts: the waiting sessions drain, a slow one is active, the consumer a worker", async () => {
    workers = await startPeer(gateway.config, { gateway: false, workers: {} });
    for (const runId of waitingRunIds) {
      expect(await gateway.rpc("agent.wait", { runId, timeoutMs: 15_000 })).toMatchObject({ status: "ok" });
    }
    // A slow turn: its session stays with a ready drain while the board is looked at.
    const slow = await gateway.rpc("agent", { sessionKey: "slowpoke", message: "slow one" });
    await waitRunning(gateway, slow.runId);
    const ready = await settle(
      async () => {
        const q = await readyQueue("active");
        // Only the slow turn's session is still held by a drain.
        return q.counts.waiting === 0 && q.counts.active === 1 && q.hasWorkers === true ? q : null;
      },
      { what: "no session waiting, the slow one active, a consumer listed", timeoutMs: 15_000 },
    );
    expect(ready.jobs.map((j) => [j.id, j.name])).toEqual([[slow.runId, "agent:main:slowpoke"]]);
    expect(board?.pageErrors).toEqual([]);
  });
});

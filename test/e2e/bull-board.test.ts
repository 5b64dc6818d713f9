/**
 * Bull Board in a real headless Chromium (Debian's /usr/bin/chromium driven by playwright-core):
 * the board at /admin/queues renders behind the gateway's auth (Basic with the token as
 * password), shows all five Switchboard queues and the ready list's read-only view, and the runs
 * queue lists completed jobs. test/e2e/bull-board-ready.test.ts covers the ready list's view.
 */
import { copyFileSync, readFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QUEUE_NAMES } from "../../src/queues/queue-names.js";
import { READY_BOARD_NAME } from "../../src/gateway/ready-board.js";
import { ROOT, startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";

const CHROMIUM = "/usr/bin/chromium";
const TOKEN = "board-token-123";
const SCREENSHOT = join(ROOT, "test-results/bull-board.png");
const DOCS_COPY = join(ROOT, "docs/images/bull-board.png");

let sys: TestSystem;
let browser: Browser | undefined;
let context: BrowserContext | undefined;
let page: Page;
const pageErrors: string[] = [];
const failedAssets: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM}: install it with \`apt-get update && apt-get install -y chromium\` ` +
        `(the CI script does this)`,
    );
  }
  rmSync(SCREENSHOT, { force: true }); // never pass on a stale screenshot
  // Every wake a drain job, so the runs queue lists the drains this test makes (by default a
  // drain woken from the ready list is not a job: docs/design/runs.md, "Wake-ups").
  sys = await startTestSystem({ gateway: { auth: { token: TOKEN } }, workers: { wake: "drain-job" } });

  // Two inbound DMs: each completes a run job and a reply delivery job (no adapter: no_route).
  const runIds: string[] = [];
  for (const [from, text] of [
    ["111", "hello board"],
    ["222", "second message"],
  ] as const) {
    const res = await sys.post("/v1/inbound", { channel: "telegram", chatType: "dm", from, text });
    expect(res.status).toBe(202);
    runIds.push(res.body.runId);
  }
  for (const runId of runIds) {
    const waited = await sys.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(waited).toMatchObject({ status: "ok" });
  }
  await settle(async () => ((await sys.svc.queues.runs.getJobCounts("completed")).completed ?? 0) >= 1, {
    what: "a completed job on the runs queue",
    timeoutMs: 10_000,
  });
  await settle(async () => ((await sys.svc.queues.delivery.getJobCounts("completed")).completed ?? 0) >= 2, {
    what: "2 completed jobs on the delivery queue",
    timeoutMs: 10_000,
  });

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-background-networking",
      "--disable-gpu",
      "--disable-component-update",
      "--no-first-run",
      "--disable-sync",
    ],
  });
  context = await browser.newContext({
    httpCredentials: { username: "ops", password: TOKEN },
    viewport: { width: 1400, height: 900 },
  });
  page = await context.newPage();
  page.on("pageerror", (err) => pageErrors.push(err.message));
  page.on("response", (res) => {
    if (res.url().startsWith(sys.url) && res.status() >= 400) failedAssets.push(`${res.status()} ${res.url()}`);
  });
}, 60_000);

afterAll(async () => {
  await context?.close().catch(() => {});
  await browser?.close().catch(() => {});
  await sys?.close();
});

describe("Bull Board in headless Chromium", () => {
  it("answers 401 with a Basic challenge without credentials, for the page and its API", async () => {
    for (const path of ["/admin/queues", "/admin/queues/api/queues"]) {
      const res = await fetch(`${sys.url}${path}`);
      expect(res.status, path).toBe(401);
      expect(res.headers.get("www-authenticate"), path).toMatch(/^Basic /);
    }
    const wrong = await fetch(`${sys.url}/admin/queues`, {
      headers: { authorization: `Basic ${Buffer.from("ops:wrong").toString("base64")}` },
    });
    expect(wrong.status).toBe(401);
    // A browser without credentials is refused too: headless Chromium answers the Basic
    // challenge by giving up (ERR_INVALID_AUTH_CREDENTIALS), and its request API sees the 401.
    const anon = await browser!.newContext();
    try {
      const p = await anon.newPage();
      const outcome = await p.goto(`${sys.url}/admin/queues`).then(
        async (res) => `status ${res?.status()}: ${await p.content()}`,
        (err: Error) => err.message,
      );
      expect(outcome).toMatch(/ERR_INVALID_AUTH_CREDENTIALS|^status 401:/);
      expect(outcome).not.toContain("Switchboard");
      const viaBrowser = await anon.request.get(`${sys.url}/admin/queues`);
      expect(viaBrowser.status()).toBe(401);
    } finally {
      await anon.close();
    }
  });

  it("renders the overview with every queue and the ready list", async () => {
    const res = await page.goto(`${sys.url}/admin/queues`, { waitUntil: "networkidle" });
    expect(res?.status()).toBe(200);
    // One overview card per queue, each linking to its queue page (not just the sidebar entry).
    const boardNames = [...QUEUE_NAMES, READY_BOARD_NAME];
    const cards = page.locator('[class*="queueCard"]');
    await expect
      .poll(async () => await cards.count(), { timeout: 15_000, message: "a card per queue on the overview" })
      .toBe(boardNames.length);
    for (const name of boardNames) {
      const link = cards.locator(`a[href="/admin/queues/queue/${name}"]`);
      expect(await link.count(), `card for queue ${name}`).toBe(1);
      expect((await link.innerText()).trim()).toBe(name);
    }
    // The board's own data call reports them all, too.
    const api = await page.evaluate(async () => (await fetch("/admin/queues/api/queues?page=1&jobsPerPage=10")).json());
    expect((api as { queues: { name: string }[] }).queues.map((q) => q.name).sort()).toEqual(boardNames.sort());
    await expect.poll(async () => await page.getByText("Switchboard").count()).toBeGreaterThan(0);
    expect(failedAssets, "no asset or API request of the board failed").toEqual([]);
    expect(pageErrors, "no JavaScript error on the page").toEqual([]);
    mkdirSync(join(ROOT, "test-results"), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });

  it("the runs queue page lists its completed jobs", async () => {
    const completedIds = (await sys.svc.queues.runs.getJobs(["completed"])).map((j) => j.id!).sort();
    expect(completedIds.length).toBeGreaterThan(0);
    const res = await page.goto(`${sys.url}/admin/queues/queue/runs?status=completed`, { waitUntil: "networkidle" });
    expect(res?.status()).toBe(200);
    await expect.poll(async () => await page.locator("h1", { hasText: "runs" }).count(), { timeout: 15_000 }).toBe(1);
    // One job card per completed job: a link "#<id> drain" to the job's page.
    for (const id of completedIds) {
      const card = page.locator(`a[href="/admin/queues/queue/runs/${id}?status=completed"]`);
      await expect
        .poll(async () => (await card.count()) > 0 && (await card.first().innerText()).replace(/\s+/g, " "), {
          timeout: 15_000,
          message: `completed job ${id} listed`,
        })
        .toBe(`#${id} drain`);
    }
    const listed = await page.locator('a[href^="/admin/queues/queue/runs/"][href$="?status=completed"]').count();
    expect(listed).toBe(completedIds.length);
    // The board's own API agrees (absolute path: the page URL has no trailing slash).
    const api = (await page.evaluate(async () =>
      (await fetch("/admin/queues/api/queues?activeQueue=runs&status=completed&page=1&jobsPerPage=50")).json(),
    )) as {
      queues: { name: string; counts: Record<string, number>; jobs: { id: string; finishedOn?: number }[] }[];
    };
    const runs = api.queues.find((q) => q.name === "runs")!;
    expect(runs.counts.completed).toBe(completedIds.length);
    expect(runs.jobs.map((j) => j.id).sort()).toEqual(completedIds);
    expect(runs.jobs.every((j) => typeof j.finishedOn === "number")).toBe(true);
    expect(failedAssets).toEqual([]);
    expect(pageErrors).toEqual([]);
    await page.screenshot({ path: join(ROOT, "test-results/bull-board-runs-completed.png"), fullPage: true });
  });

  it("saves a real overview screenshot (copied to the docs with UPDATE_DOCS_SCREENSHOTS=1)", () => {
    expect(existsSync(SCREENSHOT)).toBe(true);
    const png = readFileSync(SCREENSHOT);
    expect(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
    expect(png.length).toBeGreaterThan(10_000); // a rendered board, not a blank page
    // The committed docs image changes only when someone asks for it, not on every test run.
    if (process.env.UPDATE_DOCS_SCREENSHOTS === "1") {
      mkdirSync(join(ROOT, "docs/images"), { recursive: true });
      copyFileSync(SCREENSHOT, DOCS_COPY);
    }
  });
});

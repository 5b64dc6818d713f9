/**
 * An operator pauses the `runs` queue in Bull Board, in a real headless Chromium (its queue menu,
 * "Pause", "Confirm"): a message that arrives then is accepted and held, the ready list shows as
 * paused with it, and "Resume" runs it, once. src/workers/queue-pauses.ts is what makes the ready
 * list (no BullMQ job) obey the pause; test/integration/pause-turns.test.ts covers the drains.
 */
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getRun, waitRun } from "../helpers/api.js";
import { ROOT, startTestSystem, type TestSystem } from "../helpers/system.js";
import { settle } from "../helpers/settle.js";
import { openBoardBrowser, type BoardBrowser } from "../helpers/board-browser.js";
import { PAUSE_POLL_MS } from "../../src/workers/queue-pauses.js";

const TOKEN = "pause-board-token";
const SCREENSHOT = join(ROOT, "test-results/bull-board-paused.png");

let sys: TestSystem;
let board: BoardBrowser | undefined;
let page: Page;

beforeAll(async () => {
  sys = await startTestSystem({ gateway: { auth: { token: TOKEN } } });
  board = await openBoardBrowser(TOKEN);
  page = board.page;
}, 60_000);

afterAll(async () => {
  await board?.close();
  await sys?.close();
});

/** The runs queue's menu in the board, one of its actions, and the confirmation it asks for. */
async function queueAction(action: "Pause" | "Resume"): Promise<void> {
  await page.goto(`${sys.url}/admin/queues/queue/runs`, { waitUntil: "networkidle" });
  await page.locator('button[class*="trigger"]').click();
  await page.getByRole("menuitem", { name: action, exact: true }).click();
  const dialog = page.getByRole("alertdialog").or(page.getByRole("dialog"));
  await expect.poll(async () => await dialog.innerText(), { timeout: 10_000 }).toMatch(/Are you sure/);
  await dialog.getByRole("button", { name: "Confirm" }).click();
}

async function inbound(text: string): Promise<string> {
  const res = await sys.post("/v1/inbound", { channel: "telegram", chatType: "dm", from: "321", text });
  expect(res.status).toBe(202);
  return res.body.runId as string;
}

describe("pausing the runs queue from Bull Board", () => {
  it("holds a message that arrives while paused, shows it, and runs it once on resume", async () => {
    expect(await waitRun(sys, await inbound("before the pause"))).toMatchObject({ status: "ok" });

    await queueAction("Pause");
    await settle(async () => await sys.svc.queues.runs.isPaused(), { what: "the board's pause reached BullMQ" });
    // Every worker has read the flag (once a second) before the message comes.
    await new Promise((r) => setTimeout(r, PAUSE_POLL_MS * 2.5));
    const held = await inbound("while paused");
    await new Promise((r) => setTimeout(r, 1500));
    expect((await getRun(sys, held)).status).toBe("queued");
    expect(await sys.svc.redis.llen(sys.svc.keys.readyList())).toBe(1);

    // The overview: runs and the ready list both paused, the held session waiting on the latter.
    await page.goto(`${sys.url}/admin/queues`, { waitUntil: "networkidle" });
    const api = (await page.evaluate(async () => (await fetch("/admin/queues/api/queues")).json())) as {
      queues: { name: string; isPaused: boolean; counts: Record<string, number> }[];
    };
    const shown = Object.fromEntries(api.queues.map((q) => [q.name, q]));
    expect(shown.runs?.isPaused).toBe(true);
    expect(shown.ready?.isPaused).toBe(true);
    expect(shown.ready?.counts.waiting).toBe(1);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    await queueAction("Resume");
    expect(await waitRun(sys, held)).toMatchObject({ status: "ok" });
    expect((await getRun(sys, held)).attempts).toBe(1);
    expect(await sys.svc.queues.runs.isPaused()).toBe(false);
    expect(board?.pageErrors).toEqual([]);
  }, 60_000);
});

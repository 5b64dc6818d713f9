/**
 * Bull Board in a real headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core),
 * signed in as the gateway's Basic auth expects (any user, the token as password), with the
 * page's script errors collected: what the board's e2e tests share.
 */
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export interface BoardBrowser {
  browser: Browser;
  page: Page;
  /** Uncaught errors of the page's own scripts, in order. */
  pageErrors: string[];
  close(): Promise<void>;
}

export async function openBoardBrowser(token: string): Promise<BoardBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install -y chromium`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--no-first-run", "--disable-sync"],
  });
  const context = await browser.newContext({
    httpCredentials: { username: "ops", password: token },
    viewport: { width: 1400, height: 900 },
  });
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (err) => pageErrors.push(err.message));
  return {
    browser,
    page,
    pageErrors,
    async close() {
      await context.close().catch(() => {});
      await browser.close().catch(() => {});
    },
  };
}

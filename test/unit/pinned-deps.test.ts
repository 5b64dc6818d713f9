/**
 * package.json `overrides` pin two transitive packages to releases that support Node 20
 * (the newest ones declare `engines: node >=22`): content-disposition under @fastify/static
 * (Bull Board and the /docs page serve files through it) and cookie under light-my-request
 * (fastify's `inject`). These exercise exactly the functions those packages call.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Fastify from "fastify";
import { afterAll, describe, expect, it } from "vitest";

const require = createRequire(import.meta.url);
const dir = mkdtempSync(join(tmpdir(), "sb-pinned-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function installedVersion(pkg: string, from: string): { version: string; engines?: { node?: string } } {
  // The package `from` gets when it requires `pkg`; its package.json is not in `exports`, so walk up.
  let d = dirname(createRequire(require.resolve(`${from}/package.json`)).resolve(pkg));
  while (!existsSync(join(d, "package.json")) || JSON.parse(readFileSync(join(d, "package.json"), "utf8")).name !== pkg)
    d = dirname(d);
  return JSON.parse(readFileSync(join(d, "package.json"), "utf8")) as { version: string; engines?: { node?: string } };
}

describe("transitive packages pinned for Node 20", () => {
  it("the versions actually installed accept Node 20", () => {
    for (const [pkg, from] of [
      ["content-disposition", "@fastify/static"],
      ["cookie", "light-my-request"],
    ] as const) {
      const v = installedVersion(pkg, from);
      expect(v.engines?.node, `${pkg}@${v.version} under ${from}`).toBe(">=18");
    }
  });

  it("@fastify/static serves a download with a Content-Disposition for a non-ASCII name", async () => {
    writeFileSync(join(dir, "report.txt"), "hello");
    const app = Fastify();
    await app.register((await import("@fastify/static")).default, { root: dir, serve: false });
    app.get("/dl", (_req, reply) => reply.download("report.txt", "résumé.txt"));
    const res = await app.inject({ method: "GET", url: "/dl" });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe("hello");
    expect(res.headers["content-disposition"]).toBe(
      `attachment; filename="r?sum?.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt`,
    );
    await app.close();
  });

  it("fastify inject sends request cookies and reads Set-Cookie (light-my-request + cookie)", async () => {
    const app = Fastify();
    app.get("/c", (req, reply) =>
      reply.header("set-cookie", "sid=abc; Path=/; HttpOnly").send({ cookie: req.headers.cookie ?? null }),
    );
    const res = await app.inject({ method: "GET", url: "/c", cookies: { a: "1", b: "x y" } });
    expect(res.json()).toEqual({ cookie: "a=1; b=x%20y" });
    expect(res.cookies).toEqual([{ name: "sid", value: "abc", path: "/", httpOnly: true }]);
    await app.close();
  });
});

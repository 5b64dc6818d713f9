/**
 * The API reference: GET /openapi.json is an OpenAPI 3.1 document generated from the zod
 * schemas, covering every RPC method, every session tool and every other endpoint; Swagger UI
 * answers at /docs from local assets; `switchboard call --list` names every RPC method.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, ROOT, startTestSystem, type TestSystem } from "../helpers/system.js";
import { RPC_CATALOG } from "../../src/rpc/catalog.js";
import { TOOL_NAMES } from "../../src/tools/tool-runtime.js";

const TOKEN = "api-docs-token-0123";
const AUTH = { authorization: `Bearer ${TOKEN}` };
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

let sys: TestSystem;
let doc: any;

beforeAll(async () => {
  sys = await startTestSystem({ gateway: { auth: { token: TOKEN } }, maintenance: { sweepEveryMs: 3_600_000 } });
  const r = await sys.get("/openapi.json");
  expect(r.status).toBe(200);
  doc = r.body;
});

afterAll(async () => {
  await sys?.close();
});

/** Every `$ref` string anywhere in `node`. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) refs(n, out);
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

function resolve(ref: string): unknown {
  expect(ref.startsWith("#/")).toBe(true);
  return ref
    .slice(2)
    .split("/")
    .reduce<any>((n, seg) => (n === undefined ? undefined : n[seg.replace(/~1/g, "/").replace(/~0/g, "~")]), doc);
}

describe("GET /openapi.json", () => {
  it("is a structurally valid OpenAPI 3.1 document", () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(typeof doc.info.title).toBe("string");
    expect(typeof doc.info.version).toBe("string");
    expect(Object.keys(doc.paths).length).toBeGreaterThan(20);
    const operationIds = new Set<string>();
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      expect(path.startsWith("/"), path).toBe(true);
      const ops = Object.keys(item).filter((k) => METHODS.includes(k));
      expect(ops.length, path).toBeGreaterThan(0);
      for (const m of ops) {
        const op = item[m];
        expect(Object.keys(op.responses).length, `${m} ${path}`).toBeGreaterThan(0);
        for (const [status, res] of Object.entries<any>(op.responses)) {
          expect(status, `${m} ${path}`).toMatch(/^([1-5]\d\d|default)$/);
          expect(typeof res.description, `${m} ${path} ${status}`).toBe("string");
          for (const media of Object.values<any>(res.content ?? {}))
            expect(media.schema, `${m} ${path} ${status}`).toBeTypeOf("object");
        }
        if (op.requestBody) {
          for (const media of Object.values<any>(op.requestBody.content)) expect(media.schema).toBeTypeOf("object");
        }
        // Every {param} of the template is declared as a path parameter.
        for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) {
          expect(
            op.parameters?.some((p: any) => p.in === "path" && p.name === name && p.required === true),
            `${path} declares ${name}`,
          ).toBe(true);
        }
        for (const p of op.parameters ?? []) {
          expect(["path", "query", "header", "cookie"]).toContain(p.in);
          expect(typeof p.name).toBe("string");
        }
        if (op.operationId) {
          expect(operationIds.has(op.operationId), op.operationId).toBe(false);
          operationIds.add(op.operationId);
        }
        for (const req of op.security ?? doc.security)
          for (const scheme of Object.keys(req)) expect(doc.components.securitySchemes[scheme]).toBeTruthy();
      }
    }
    const all = refs(doc);
    expect(all.length).toBeGreaterThan(10);
    for (const ref of all) expect(resolve(ref), ref).toBeTypeOf("object");
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components.securitySchemes.basicAuth).toMatchObject({ type: "http", scheme: "basic" });
  });

  it("has one path per RPC method the gateway serves, with its params schema and description", () => {
    const served = Object.keys(sys.gateway!.rpc);
    expect(served.length).toBeGreaterThan(10);
    for (const method of served) {
      const op = doc.paths[`/v1/rpc/${method}`]?.post;
      expect(op, method).toBeTruthy();
      expect(op.summary.length, method).toBeGreaterThan(10);
      const schema: any = resolve(op.requestBody.content["application/json"].schema.$ref);
      expect(schema, method).toBeTypeOf("object");
    }
    // The catalog describes exactly the methods served (a new method needs its line).
    expect(Object.keys(RPC_CATALOG).sort()).toEqual([...served].sort());
    const agent: any = resolve(doc.paths["/v1/rpc/agent"].post.requestBody.content["application/json"].schema.$ref);
    expect(agent.type).toBe("object");
    expect(agent.required).toContain("message");
    expect(Object.keys(agent.properties)).toEqual(expect.arrayContaining(["sessionKey", "message", "idempotencyKey"]));
  });

  it("has one path per session tool with its args schema", () => {
    expect(TOOL_NAMES.length).toBeGreaterThanOrEqual(8);
    for (const name of TOOL_NAMES) {
      const op = doc.paths[`/v1/tools/${name}`]?.post;
      expect(op, name).toBeTruthy();
      const schema: any = resolve(op.requestBody.content["application/json"].schema.$ref);
      expect(schema.required).toEqual(expect.arrayContaining(["sessionKey", "args"]));
      expect(schema.properties.args.type, name).toBe("object");
    }
    const send: any = resolve(
      doc.paths["/v1/tools/sessions_send"].post.requestBody.content["application/json"].schema.$ref,
    );
    expect(send.properties.args.required).toContain("message");
  });

  it("covers inbound, runs, deliveries, health, and the OpenAI door", () => {
    for (const [path, method] of [
      ["/v1/inbound", "post"],
      ["/v1/runs/{runId}", "get"],
      ["/v1/deliveries", "get"],
      ["/healthz", "get"],
      ["/readyz", "get"],
      ["/metrics", "get"],
      ["/v1/chat/completions", "post"],
      ["/v1/models", "get"],
      ["/v1/models/{model}", "get"],
    ] as const) {
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeTruthy();
    }
    const inbound: any = resolve(doc.paths["/v1/inbound"].post.requestBody.content["application/json"].schema.$ref);
    expect(inbound.required).toEqual(expect.arrayContaining(["channel", "chatType", "from", "text"]));
    expect(doc.paths["/v1/inbound"].post.responses["413"]).toBeTruthy();
    expect(doc.paths["/v1/chat/completions"].post.responses["200"].content["text/event-stream"]).toBeTruthy();
    expect(doc.paths["/healthz"].get.security).toEqual([]);
  });

  it("is behind the gateway's auth like every other endpoint", async () => {
    expect((await sys.get("/openapi.json", {})).status).toBe(401);
  });
});

describe("/docs", () => {
  it("answers Swagger UI's HTML and its assets from the package (no CDN)", async () => {
    const res = await fetch(`${sys.url}/docs`, { headers: AUTH });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    const html = await res.text();
    expect(html).toMatch(/swagger/i);
    // Every script and stylesheet is served from here.
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.filter((a) => /^https?:|^\/\//.test(a))).toEqual([]);
    const bundle = await fetch(`${sys.url}/docs/static/swagger-ui-bundle.js`, { headers: AUTH });
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100_000);
    // The document Swagger UI loads is the same one.
    const json = (await (await fetch(`${sys.url}/docs/json`, { headers: AUTH })).json()) as any;
    expect(json.paths["/v1/rpc/agent"]).toEqual(doc.paths["/v1/rpc/agent"]);
  });

  it("asks browsers for Basic auth (the token as password) and accepts it", async () => {
    const refused = await fetch(`${sys.url}/docs`);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/^Basic/);
    const basic = await fetch(`${sys.url}/docs`, {
      headers: { authorization: `Basic ${Buffer.from(`me:${TOKEN}`).toString("base64")}` },
    });
    expect(basic.status).toBe(200);
  });
});

describe("switchboard call --list", () => {
  it("prints every RPC method with a one-line description, without a gateway or Redis", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, "call", "--list"], {
      cwd: ROOT,
      env: { ...process.env, SWITCHBOARD_URL: "http://127.0.0.1:1" },
    });
    const lines = stdout.trim().split("\n");
    const served = Object.keys(sys.gateway!.rpc).sort();
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual(served);
    for (const line of lines) expect(line.split(/\s{2,}/)[1]?.length, line).toBeGreaterThan(10);
    const json = JSON.parse(
      (await promisify(execFile)(process.execPath, [CLI, "call", "--list", "--json"], { cwd: ROOT })).stdout,
    );
    expect(json.map((m: { method: string }) => m.method)).toEqual(served);
  });
});

import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { getEventListeners } from "node:events";
import { fileURLToPath } from "node:url";
import type { ScriptRule } from "../../src/config/schema.js";
import { parseConfig } from "../../src/config/index.js";
import {
  EchoRuntime,
  OpenAIRuntime,
  RunAbortedError,
  ScriptRuntime,
  createRuntime,
  type RunInput,
  type ToolInvoker,
} from "../../src/runtimes/index.js";

/** Stand-in for the session tools: records every call and answers canned results. */
class RecordingTools implements ToolInvoker {
  readonly calls: { name: string; args: Record<string, unknown> }[] = [];
  constructor(private readonly answers: Record<string, unknown | ((args: Record<string, unknown>) => unknown)> = {}) {}
  definitions(): { name: string; description: string; parameters: Record<string, unknown> }[] {
    return Object.keys(this.answers).map((name) => ({ name, description: name, parameters: { type: "object" } }));
  }
  async call(name: string, args: Record<string, unknown>): Promise<unknown> {
    this.calls.push({ name, args });
    const answer = this.answers[name];
    if (answer === undefined) throw new Error(`unknown tool ${name}`);
    return typeof answer === "function" ? (answer as (a: Record<string, unknown>) => unknown)(args) : answer;
  }
}

function runInput(text: string, over: Partial<RunInput> = {}): RunInput {
  return {
    runId: "run-1",
    agentId: "main",
    sessionKey: "agent:main:main",
    sessionId: "sess-1",
    text,
    step: "turn",
    provenance: "user",
    loadHistory: async () => [],
    signal: new AbortController().signal,
    tools: new RecordingTools(),
    ...over,
  };
}

function rt(rules: ScriptRule[]): ScriptRuntime {
  return new ScriptRuntime(rules);
}

describe("script runtime: matching", () => {
  it("tries rules in order and the first match acts", async () => {
    const r = rt([
      { when: { contains: "ping" }, reply: "first" },
      { when: { contains: "ping pong" }, reply: "second" },
      { reply: "fallback" },
    ]);
    expect((await r.run(runInput("ping pong"))).reply).toBe("first");
    expect((await r.run(runInput("pong"))).reply).toBe("fallback");
  });

  it("contains is a case-sensitive substring test", async () => {
    const r = rt([{ when: { contains: "Deploy" }, reply: "yes" }]);
    expect((await r.run(runInput("please Deploy now"))).reply).toBe("yes");
    expect((await r.run(runInput("please deploy now"))).reply).toBe("");
  });

  it("regex tests the text; contains and regex must both hold", async () => {
    const r = rt([
      { when: { contains: "urgent", regex: "^ticket (\\d+)" }, reply: "both {{1}}" },
      { when: { regex: "^ticket (\\d+)" }, reply: "regex {{1}}" },
    ]);
    expect((await r.run(runInput("ticket 42 urgent"))).reply).toBe("both 42");
    expect((await r.run(runInput("ticket 42"))).reply).toBe("regex 42");
    expect((await r.run(runInput("urgent ticket 42"))).reply).toBe("");
  });

  it("provenance and step must equal the input's", async () => {
    const r = rt([
      { when: { step: "announce" }, reply: "ANNOUNCE_SKIP" },
      { when: { step: "reply", provenance: "inter_session" }, reply: "REPLY_SKIP" },
      { when: { provenance: "inter_session" }, reply: "from another session" },
      { when: { provenance: "system" }, reply: "NO_REPLY" },
      { reply: "plain" },
    ]);
    expect((await r.run(runInput("x", { step: "announce", provenance: "inter_session" }))).reply).toBe("ANNOUNCE_SKIP");
    expect((await r.run(runInput("x", { step: "reply", provenance: "inter_session" }))).reply).toBe("REPLY_SKIP");
    expect((await r.run(runInput("x", { step: "reply", provenance: "user" }))).reply).toBe("plain");
    expect((await r.run(runInput("x", { step: "turn", provenance: "inter_session" }))).reply).toBe(
      "from another session",
    );
    expect((await r.run(runInput("x", { provenance: "system" }))).reply).toBe("NO_REPLY");
    expect((await r.run(runInput("x"))).reply).toBe("plain");
  });

  it("skip tokens are passed verbatim (no trimming, no templating damage)", async () => {
    const r = rt([{ reply: "REPLY_SKIP" }]);
    const out = await r.run(runInput("anything"));
    expect(out).toEqual({ reply: "REPLY_SKIP" });
  });

  it("no matching rule replies the empty string and calls nothing", async () => {
    const tools = new RecordingTools({ sessions_list: { count: 0 } });
    const r = rt([{ when: { contains: "never" }, tools: [{ name: "sessions_list", args: {} }], reply: "x" }]);
    const out = await r.run(runInput("hello", { tools }));
    expect(out).toEqual({ reply: "" });
    expect(tools.calls).toEqual([]);
    expect(await rt([]).run(runInput("hello"))).toEqual({ reply: "" });
  });

  it("a rule without reply answers the empty string", async () => {
    expect((await rt([{ usage: { input: 1, output: 2 } }]).run(runInput("hi"))).reply).toBe("");
  });

  it("rejects an invalid regex when constructed", () => {
    expect(() => rt([{ when: { regex: "(" } }])).toThrow(/rule #0: invalid regex/);
  });
});

describe("script runtime: templating", () => {
  it("substitutes run fields and capture groups", async () => {
    const r = rt([
      {
        when: { regex: "^(\\w+) to (\\w+)(?: via (\\w+))?" },
        reply:
          "{{text}}|{{sessionKey}}|{{agentId}}|{{runId}}|{{step}}|{{sessionId}}|{{provenance}}|" +
          "{{1}}|{{ 2 }}|[{{3}}]|[{{9}}]|{{0}}",
      },
    ]);
    const out = await r.run(runInput("send to ops", { step: "reply", provenance: "inter_session", runId: "r-9" }));
    expect(out.reply).toBe(
      "send to ops|agent:main:main|main|r-9|reply|sess-1|inter_session|send|ops|[]|[]|send to ops",
    );
  });

  it("capture-group placeholders are empty for a rule without regex", async () => {
    expect((await rt([{ reply: "[{{1}}]" }]).run(runInput("abc"))).reply).toBe("[]");
  });

  it("is single-pass: substituted text is not expanded again; unknown names stay", async () => {
    const r = rt([{ when: { regex: "(.*)" }, reply: "{{text}} / {{1}} / {{unknown}} / {{tool.x}}" }]);
    expect((await r.run(runInput("{{sessionKey}}"))).reply).toBe(
      "{{sessionKey}} / {{sessionKey}} / {{unknown}} / {{tool.x}}",
    );
  });

  it("templates every string inside tool args, deeply, and calls tools in order", async () => {
    const tools = new RecordingTools({
      sessions_send: { status: "ok", reply: "pong" },
      sessions_list: { count: 0, sessions: [] },
    });
    const rule: ScriptRule = {
      when: { regex: "^ask (\\S+) (.+)$" },
      tools: [
        { name: "sessions_list", args: { search: "{{1}}", limit: 3, kinds: ["main", "{{agentId}}"] } },
        {
          name: "sessions_send",
          args: {
            sessionKey: "agent:{{1}}:main",
            message: "{{2}} (from {{sessionKey}})",
            timeoutSeconds: 5,
            meta: { nested: [{ deep: "{{runId}}" }, 7, true, null], flag: false },
          },
        },
      ],
      reply: "done",
    };
    const snapshot = JSON.parse(JSON.stringify(rule)) as unknown;
    const out = await rt([rule]).run(runInput("ask ops how are you", { tools }));
    expect(tools.calls).toEqual([
      { name: "sessions_list", args: { search: "ops", limit: 3, kinds: ["main", "main"] } },
      {
        name: "sessions_send",
        args: {
          sessionKey: "agent:ops:main",
          message: "how are you (from agent:main:main)",
          timeoutSeconds: 5,
          meta: { nested: [{ deep: "run-1" }, 7, true, null], flag: false },
        },
      },
    ]);
    expect(out.toolCalls).toEqual([
      { name: "sessions_list", args: tools.calls[0]!.args, result: { count: 0, sessions: [] } },
      { name: "sessions_send", args: tools.calls[1]!.args, result: { status: "ok", reply: "pong" } },
    ]);
    // The configured rule is not mutated by templating.
    expect(rule).toEqual(snapshot);
  });

  it("{{tool.N.path}} reads this rule's tool results; non-strings are JSON", async () => {
    const tools = new RecordingTools({
      sessions_list: { count: 2, sessions: [{ key: "agent:main:main" }, { key: "agent:ops:main" }] },
      sessions_send: (args: Record<string, unknown>) => ({
        status: "ok",
        reply: `got ${String(args.sessionKey)}`,
        runId: "r2",
      }),
    });
    const r = rt([
      {
        tools: [
          { name: "sessions_list", args: {} },
          // A later call may use an earlier result.
          { name: "sessions_send", args: { sessionKey: "{{tool.0.sessions.1.key}}", message: "hi" } },
        ],
        reply:
          "{{tool.1.status}}|{{tool.1.reply}}|{{tool.0.count}}|{{tool.0.sessions.0}}|" +
          "[{{tool.0.missing}}]|[{{tool.5.status}}]|{{tool.1}}",
      },
    ]);
    const out = await r.run(runInput("go", { tools }));
    expect(tools.calls[1]!.args).toEqual({ sessionKey: "agent:ops:main", message: "hi" });
    expect(out.reply).toBe(
      'ok|got agent:ops:main|2|{"key":"agent:main:main"}|[]|[]|' +
        '{"status":"ok","reply":"got agent:ops:main","runId":"r2"}',
    );
  });

  it("a failing tool fails the run", async () => {
    const tools = new RecordingTools({});
    await expect(
      rt([{ tools: [{ name: "nope", args: {} }], reply: "x" }]).run(runInput("go", { tools })),
    ).rejects.toThrow("unknown tool nope");
  });
});

describe("script runtime: fail, delay, abort", () => {
  it("fail throws the configured error after the delay, before any tool", async () => {
    const tools = new RecordingTools({ sessions_list: {} });
    const r = rt([{ delayMs: 150, fail: "model overloaded: {{text}}", tools: [{ name: "sessions_list", args: {} }] }]);
    const started = performance.now();
    const err = await r.run(runInput("q", { tools })).then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(RunAbortedError);
    expect((err as Error).message).toBe("model overloaded: q");
    expect(elapsed).toBeGreaterThanOrEqual(140);
    expect(tools.calls).toEqual([]);
  });

  it("a delay without abort completes and leaves no abort listener behind", async () => {
    const ac = new AbortController();
    const started = performance.now();
    const out = await rt([{ delayMs: 60, reply: "late" }]).run(runInput("q", { signal: ac.signal }));
    expect(out.reply).toBe("late");
    expect(performance.now() - started).toBeGreaterThanOrEqual(50);
    expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  it("abort during a 10 s delay rejects promptly with RunAbortedError carrying the reason", async () => {
    const ac = new AbortController();
    const reason = new Error("killed by /stop");
    const timeoutsBefore = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const started = performance.now();
    const p = rt([{ delayMs: 10_000, reply: "too late" }]).run(runInput("q", { signal: ac.signal }));
    setTimeout(() => ac.abort(reason), 50);
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(RunAbortedError);
    expect((err as RunAbortedError).reason).toBe(reason);
    expect((err as Error).message).toContain("killed by /stop");
    expect(elapsed).toBeLessThan(500);
    // The 10 s timer was cleared, not left to run out.
    const timeoutsAfter = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    expect(timeoutsAfter).toBeLessThanOrEqual(timeoutsBefore);
  });

  it("an already aborted signal rejects at once", async () => {
    const ac = new AbortController();
    ac.abort("timeout");
    const tools = new RecordingTools({ sessions_list: {} });
    const err = await rt([{ tools: [{ name: "sessions_list", args: {} }] }])
      .run(runInput("q", { signal: ac.signal, tools }))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunAbortedError);
    expect((err as RunAbortedError).reason).toBe("timeout");
    expect(tools.calls).toEqual([]);
  });

  it("abort while a tool call hangs rejects promptly", async () => {
    const ac = new AbortController();
    const tools = new RecordingTools({ sessions_send: () => new Promise(() => undefined) });
    const started = performance.now();
    const p = rt([{ tools: [{ name: "sessions_send", args: {} }], reply: "x" }]).run(
      runInput("q", { signal: ac.signal, tools }),
    );
    setTimeout(() => ac.abort("killed"), 50);
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunAbortedError);
    expect((err as RunAbortedError).reason).toBe("killed");
    expect(performance.now() - started).toBeLessThan(500);
    expect(tools.calls).toHaveLength(1);
  });

  it("no timer leak: a process that aborts a 10 s delay exits right away", async () => {
    const root = fileURLToPath(new URL("../../", import.meta.url));
    const moduleUrl = new URL("../../dist/src/runtimes/index.js", import.meta.url).href;
    // The child never calls process.exit: it ends only when nothing keeps its event loop alive.
    const code = `
      const { ScriptRuntime, RunAbortedError } = await import(${JSON.stringify(moduleUrl)});
      const rt = new ScriptRuntime([{ delayMs: 10000, reply: "late" }]);
      const ac = new AbortController();
      const tools = { definitions: () => [], call: async () => null };
      const p = rt.run({ runId: "r", agentId: "main", sessionKey: "agent:main:main", sessionId: "s", text: "x",
        step: "turn", provenance: "user", loadHistory: async () => [], signal: ac.signal, tools });
      setTimeout(() => ac.abort("stop"), 50);
      try { await p; console.log("resolved"); }
      catch (e) { console.log(e instanceof RunAbortedError ? "aborted" : "other " + e); }
    `;
    const started = performance.now();
    const result = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ["--input-type=module", "-e", code], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      const killer = setTimeout(() => child.kill("SIGKILL"), 8_000);
      child.on("error", reject);
      child.on("exit", (c) => {
        clearTimeout(killer);
        resolve({ code: c, out });
      });
    });
    const elapsed = performance.now() - started;
    expect(result.out.trim()).toBe("aborted");
    expect(result.code).toBe(0);
    expect(elapsed).toBeLessThan(5_000);
  });
});

describe("script runtime: output", () => {
  it("passes usage through and omits it when not configured", async () => {
    const r = rt([
      { when: { contains: "metered" }, reply: "ok", usage: { input: 120, output: 34 } },
      { reply: "free" },
    ]);
    expect(await r.run(runInput("metered call"))).toEqual({ reply: "ok", usage: { input: 120, output: 34 } });
    const free = await r.run(runInput("other"));
    expect(free).toEqual({ reply: "free" });
    expect(free.usage).toBeUndefined();
    expect(free.toolCalls).toBeUndefined();
  });

  it("a tool call that yields the turn ends the run there: no later tool, no reply", async () => {
    let yielded: { message: string } | undefined;
    const recording = new RecordingTools({
      sessions_spawn: { status: "accepted", childSessionKey: "agent:main:subagent:x" },
      sessions_yield: (args: Record<string, unknown>) => {
        yielded = { message: String(args.message) };
        return { status: "yielded", message: args.message };
      },
      sessions_list: { count: 0 },
    });
    const tools: ToolInvoker = {
      definitions: () => recording.definitions(),
      call: (n, a) => recording.call(n, a),
      yielded: () => yielded,
    };
    const r = rt([
      {
        tools: [
          { name: "sessions_spawn", args: { task: "t" } },
          { name: "sessions_yield", args: { message: "wait {{tool.0.childSessionKey}}" } },
          { name: "sessions_list", args: {} },
        ],
        reply: "never said",
        usage: { input: 2, output: 1 },
      },
    ]);
    const out = await r.run(runInput("go", { tools }));
    expect(recording.calls.map((c) => c.name)).toEqual(["sessions_spawn", "sessions_yield"]);
    expect(out).toEqual({
      reply: "",
      yielded: { message: "wait agent:main:subagent:x" },
      usage: { input: 2, output: 1 },
      toolCalls: [
        {
          name: "sessions_spawn",
          args: { task: "t" },
          result: { status: "accepted", childSessionKey: "agent:main:subagent:x" },
        },
        {
          name: "sessions_yield",
          args: { message: "wait agent:main:subagent:x" },
          result: { status: "yielded", message: "wait agent:main:subagent:x" },
        },
      ],
    });
  });
});

describe("echo runtime and registry", () => {
  it("echo replies echo: <text>", async () => {
    const out = await new EchoRuntime().run(runInput("hello world"));
    expect(out).toEqual({ reply: "echo: hello world" });
  });

  it("createRuntime builds each kind from parsed config and caches by config object", async () => {
    const cfg = parseConfig({
      agents: {
        list: [
          { id: "a", runtime: { kind: "echo" } },
          { id: "b", runtime: { kind: "script", rules: [{ when: { contains: "x" }, reply: "{{text}}!" }] } },
          { id: "c", runtime: { kind: "openai", baseUrl: "http://127.0.0.1:9/v1", model: "m" } },
        ],
      },
    });
    const [a, b, c] = cfg.agents.list.map((e) => e.runtime!);
    const echo = createRuntime(a!);
    const script = createRuntime(b!);
    const openai = createRuntime(c!);
    expect(echo).toBeInstanceOf(EchoRuntime);
    expect(echo.kind).toBe("echo");
    expect(script).toBeInstanceOf(ScriptRuntime);
    expect(script.kind).toBe("script");
    expect(openai).toBeInstanceOf(OpenAIRuntime);
    expect(openai.kind).toBe("openai");
    expect(createRuntime(b!)).toBe(script);
    expect(createRuntime({ kind: "echo" })).not.toBe(echo);
    expect((await script.run(runInput("x marks"))).reply).toBe("x marks!");
  });
});

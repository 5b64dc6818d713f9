/**
 * Who may see or message which session (docs/concepts/tools.md, "Visibility"): every visibility level for the four
 * session tools over HTTP, the sandbox clamp, the agent-to-agent policy and allow patterns, with
 * OpenClaw's exact error texts (§6.3). `tree` is the caller and all its descendants (OpenClaw:
 * direct children only; docs/concepts/subagents.md).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import type { SessionKind } from "../../src/session/session-entry.js";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { tool, toolsConfig } from "../fixtures/tools-support.js";

const MAIN = "agent:main:main";
const GROUP = "agent:main:tg:group:g1";
const CHILD = "agent:main:subagent:c1";
const GRANDCHILD = "agent:main:subagent:gc1";
const OPS_A = "agent:ops-a:main";
const OPS_B = "agent:ops-b:main";
const GUEST = "agent:guest:main";
const XCHILD = "agent:ops-a:subagent:x1"; // spawned by MAIN, in another agent

const SAME_AGENT = [MAIN, GROUP, CHILD, GRANDCHILD];
const OTHER_AGENTS = [OPS_A, OPS_B, GUEST];

const ACTION = { history: "Session history", send: "Session send", status: "Session status" } as const;
type Act = keyof typeof ACTION;

const selfText = (a: Act) =>
  `${ACTION[a]} visibility is restricted to the current session (tools.sessions.visibility=self).`;
const treeText = (a: Act) =>
  `${ACTION[a]} visibility is restricted to the current session tree (tools.sessions.visibility=tree).`;
const crossText = (a: Act) =>
  `${ACTION[a]} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.`;
const A2A_DISABLED: Record<Act, string> = {
  history: "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
  send: "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
  status: "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
};
const A2A_DENIED: Record<Act, string> = {
  history: "Agent-to-agent history denied by tools.agentToAgent.allow.",
  send: "Agent-to-agent messaging denied by tools.agentToAgent.allow.",
  status: "Agent-to-agent status denied by tools.agentToAgent.allow.",
};

async function put(
  sys: TestSystem,
  key: string,
  agentId: string,
  kind: SessionKind,
  patch: Record<string, unknown> = {},
) {
  await sys.svc.sessions.upsert(key, { agentId, kind }, { sessionId: randomUUID(), ...patch });
}

async function visSystem(tools: ConfigInput["tools"], extra: ConfigInput = {}): Promise<TestSystem> {
  const sys = await startTestSystem(
    toolsConfig({
      ...extra,
      tools,
      agents: {
        ...(extra.agents ?? {}),
        list: [{ id: "main", default: true }, { id: "ops-a" }, { id: "ops-b" }, { id: "guest" }],
      },
    }),
  );
  await put(sys, MAIN, "main", "main");
  await put(sys, GROUP, "main", "group");
  await put(sys, CHILD, "main", "other", { spawnedBy: MAIN });
  await put(sys, GRANDCHILD, "main", "other", { spawnedBy: CHILD });
  for (const k of OTHER_AGENTS) await put(sys, k, k.split(":")[1]!, "main");
  await put(sys, XCHILD, "ops-a", "other", { spawnedBy: MAIN });
  // Reserved keys: never listed by the tools.
  await put(sys, "global", "main", "main");
  await put(sys, "unknown", "main", "other");
  return sys;
}

const display = (k: string) => (k === MAIN ? "main" : k);

async function listKeys(
  sys: TestSystem,
  caller: string,
  args: Record<string, unknown> = {},
  sandboxed?: boolean,
): Promise<string[]> {
  const r = await tool(sys, "sessions_list", caller, args, sandboxed === undefined ? {} : { sandboxed });
  expect(r.count).toBe(r.sessions.length);
  return (r.sessions as { key: string }[]).map((s) => s.key).sort();
}

/** Run one tool against `target`; null when allowed, else `{status, error}`. */
async function attempt(
  sys: TestSystem,
  action: Act,
  caller: string,
  target: string,
  sandboxed?: boolean,
): Promise<{ status: string; error: string } | null> {
  const extra = sandboxed === undefined ? {} : { sandboxed };
  const r =
    action === "history"
      ? await tool(sys, "sessions_history", caller, { sessionKey: target }, extra)
      : action === "send"
        ? await tool(sys, "sessions_send", caller, { sessionKey: target, message: "ping", timeoutSeconds: 0 }, extra)
        : await tool(sys, "session_status", caller, { sessionKey: target }, extra);
  if (r.status === "forbidden" || r.status === "error") return { status: r.status, error: r.error };
  if (action === "history") expect(Array.isArray(r.messages)).toBe(true);
  if (action === "send") expect(r.status).toBe("accepted");
  if (action === "status") expect(r.status).toBe("ok");
  return null;
}

async function expectAllowed(sys: TestSystem, caller: string, targets: string[], sandboxed?: boolean) {
  for (const action of ["history", "status", "send"] as Act[]) {
    for (const t of targets)
      expect(await attempt(sys, action, caller, t, sandboxed), `${action} ${caller} → ${t}`).toBeNull();
  }
}

async function expectForbidden(
  sys: TestSystem,
  caller: string,
  targets: string[],
  text: (a: Act) => string,
  sandboxed?: boolean,
) {
  for (const action of ["history", "status", "send"] as Act[]) {
    for (const t of targets) {
      expect(await attempt(sys, action, caller, t, sandboxed), `${action} ${caller} → ${t}`).toEqual({
        status: "forbidden",
        error: text(action),
      });
    }
  }
}

describe("visibility self", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await visSystem({ sessions: { visibility: "self" }, agentToAgent: { enabled: true } });
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("lists only the caller, whatever the filters", async () => {
    expect(await listKeys(sys, MAIN)).toEqual(["main"]);
    expect(await listKeys(sys, MAIN, { kinds: ["group"] })).toEqual([]);
    expect(await listKeys(sys, CHILD)).toEqual([CHILD]);
  });

  it("history/status/send reach only the caller itself (`current`, `main`, its own key)", async () => {
    await expectAllowed(sys, MAIN, [MAIN, "main", "current"]);
  });

  it("other sessions of the agent — children too — are refused with the self text", async () => {
    await expectForbidden(sys, MAIN, [GROUP, CHILD], selfText);
  });

  it("other agents are refused with the cross-agent text, spawned children included", async () => {
    await expectForbidden(sys, MAIN, [OPS_A, XCHILD], crossText);
  });
});

describe("visibility tree", () => {
  // Deeper than the shared fixture: MAIN → CHILD → GRANDCHILD → GREAT, CHILD → XGRAND (another
  // agent), and CHILD's sibling SIBLING.
  const GREAT = "agent:main:subagent:ggc1";
  const XGRAND = "agent:ops-b:subagent:xg1";
  const SIBLING = "agent:main:subagent:c2";
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await visSystem({ sessions: { visibility: "tree" }, agentToAgent: { enabled: false } });
    await put(sys, GREAT, "main", "other", { spawnedBy: GRANDCHILD });
    await put(sys, XGRAND, "ops-b", "other", { spawnedBy: CHILD });
    await put(sys, SIBLING, "main", "other", { spawnedBy: MAIN });
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("lists self and all its descendants (cross-agent ones too), nothing else", async () => {
    expect(await listKeys(sys, MAIN)).toEqual([CHILD, SIBLING, GRANDCHILD, GREAT, XCHILD, XGRAND, "main"].sort());
    expect(await listKeys(sys, MAIN, { kinds: ["main"] })).toEqual(["main"]);
    expect(await listKeys(sys, MAIN, { agentId: "ops-a" })).toEqual([XCHILD]);
    expect(await listKeys(sys, MAIN, { agentId: "ops-b" })).toEqual([XGRAND]);
    // A child sees its own subtree: not its parent, not its sibling.
    expect(await listKeys(sys, CHILD)).toEqual([CHILD, GRANDCHILD, GREAT, XGRAND].sort());
    expect(await listKeys(sys, GRANDCHILD)).toEqual([GRANDCHILD, GREAT].sort());
    expect(await listKeys(sys, GREAT)).toEqual([GREAT]);
  });

  it("limit keeps the newest rows (the caller itself is not privileged)", async () => {
    await sys.svc.sessions.upsert(XCHILD, { agentId: "ops-a", kind: "other" }, {}, { now: Date.now() + 60_000 });
    expect(await listKeys(sys, MAIN, { limit: 1 })).toEqual([XCHILD]);
    const two = await tool(sys, "sessions_list", MAIN, { limit: 2 });
    expect(two.sessions[0].updatedAt).toBeGreaterThanOrEqual(two.sessions[1].updatedAt);
  });

  it("self and all descendants are reachable: children, grand- and great-grandchildren, across agents", async () => {
    await expectAllowed(sys, MAIN, ["current", CHILD, GRANDCHILD, GREAT, XCHILD, XGRAND]);
    await expectAllowed(sys, CHILD, [GRANDCHILD, GREAT, XGRAND]);
  });

  it("siblings, parents and other branches are refused with the tree text", async () => {
    await expectForbidden(sys, MAIN, [GROUP], treeText);
    await expectForbidden(sys, CHILD, [MAIN, SIBLING], treeText);
    await expectForbidden(sys, GRANDCHILD, [MAIN, CHILD, SIBLING], treeText);
    await expectForbidden(sys, GREAT, [GRANDCHILD, CHILD, MAIN], treeText);
    await expectForbidden(sys, SIBLING, [CHILD, GRANDCHILD, GREAT], treeText);
  });

  it("other agents' sessions are refused with cross-agent text (a cross-agent descendant's parent too)", async () => {
    await expectForbidden(sys, MAIN, [OPS_A, GUEST], crossText);
    await expectForbidden(sys, XGRAND, [CHILD], crossText);
  });
});

describe("visibility agent", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await visSystem({ sessions: { visibility: "agent" }, agentToAgent: { enabled: true } });
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("lists every session of the caller's agent and none of the others", async () => {
    expect(await listKeys(sys, MAIN)).toEqual(["main", GROUP, CHILD, GRANDCHILD].sort());
    expect(await listKeys(sys, MAIN, { kinds: ["group"] })).toEqual([GROUP]);
    expect(await listKeys(sys, MAIN, { agentId: "ops-a" })).toEqual([]);
    expect(await listKeys(sys, OPS_A)).toEqual(["main", XCHILD].sort());
  });

  it("same-agent sessions are reachable", async () => {
    await expectAllowed(sys, MAIN, [GROUP, GRANDCHILD]);
  });

  it("other agents are refused with cross-agent text, spawned children too (agent = same agent only)", async () => {
    await expectForbidden(sys, MAIN, [OPS_A, GUEST, XCHILD], crossText);
  });
});

describe("visibility all", () => {
  describe("agent-to-agent disabled (the default)", () => {
    // A cross-agent grandchild of MAIN, spawned by its same-agent child.
    const XGRAND = "agent:guest:subagent:xg2";
    let sys: TestSystem;
    beforeAll(async () => {
      sys = await visSystem({ sessions: { visibility: "all" } });
      await put(sys, XGRAND, "guest", "other", { spawnedBy: CHILD });
    });
    afterAll(async () => {
      await sys?.close();
    });

    it("lists the caller's agent and its own descendants (other cross-agent rows silently left out)", async () => {
      expect(await listKeys(sys, MAIN)).toEqual([...SAME_AGENT, XCHILD, XGRAND].map(display).sort());
      expect(await listKeys(sys, MAIN, { agentId: "ops-a" })).toEqual([XCHILD]);
      expect(await listKeys(sys, MAIN, { agentId: "guest" })).toEqual([XGRAND]);
      expect(await listKeys(sys, OPS_A)).toEqual(["main", XCHILD].sort());
      expect(await listKeys(sys, GROUP)).toEqual(SAME_AGENT.map(display).sort());
    });

    it("cross-agent history/status/send are refused with the A2A-disabled texts", async () => {
      await expectForbidden(sys, MAIN, [OPS_A, GUEST], (a) => A2A_DISABLED[a]);
    });

    it("the caller's own cross-agent descendants stay reachable (as under tree, #55983); others' are not", async () => {
      await expectAllowed(sys, MAIN, [XCHILD, XGRAND]);
      await expectForbidden(sys, GROUP, [XCHILD, XGRAND], (a) => A2A_DISABLED[a]);
    });

    it("same-agent sessions are all reachable", async () => {
      await expectAllowed(sys, MAIN, [GROUP, CHILD, GRANDCHILD]);
    });
  });

  describe("agent-to-agent enabled", () => {
    let sys: TestSystem;
    beforeAll(async () => {
      sys = await visSystem({ sessions: { visibility: "all" }, agentToAgent: { enabled: true } });
    });
    afterAll(async () => {
      await sys?.close();
    });

    it("lists every agent's sessions but never the reserved global/unknown", async () => {
      const keys = await listKeys(sys, MAIN);
      expect(keys).toEqual([...SAME_AGENT, ...OTHER_AGENTS, XCHILD].map(display).sort());
      expect(keys).not.toContain("global");
      expect(keys).not.toContain("unknown");
      expect(await listKeys(sys, MAIN, { agentId: "ops-a" })).toEqual([OPS_A, XCHILD].sort());
      expect(await listKeys(sys, MAIN, { search: "glob" })).toEqual([]);
    });

    it("cross-agent history/status/send are allowed", async () => {
      await expectAllowed(sys, MAIN, [OPS_A, GUEST]);
      await expectAllowed(sys, GUEST, [MAIN]);
    });
  });

  describe('agent-to-agent allow ["ops-*", "main"]', () => {
    let sys: TestSystem;
    beforeAll(async () => {
      sys = await visSystem({
        sessions: { visibility: "all" },
        agentToAgent: { enabled: true, allow: ["ops-*", "main"] },
      });
    });
    afterAll(async () => {
      await sys?.close();
    });

    it("(ops-a → ops-b) and (main → ops-a) are allowed", async () => {
      await expectAllowed(sys, OPS_A, [OPS_B]);
      await expectAllowed(sys, MAIN, [OPS_A]);
    });

    it("(guest → ops-a) and (main → guest) are denied with the allow-list texts", async () => {
      await expectForbidden(sys, GUEST, [OPS_A], (a) => A2A_DENIED[a]);
      await expectForbidden(sys, MAIN, [GUEST], (a) => A2A_DENIED[a]);
    });

    it("lists only the agents both ends of the pattern allow", async () => {
      expect(await listKeys(sys, MAIN)).toEqual([...SAME_AGENT, OPS_A, OPS_B, XCHILD].map(display).sort());
      expect(await listKeys(sys, GUEST)).toEqual(["main"]);
    });

    it("sessions of refused agents never fill a limited page: limit counts what the caller may see", async () => {
      // Six guest sessions newer than everything main may list.
      for (let i = 0; i < 6; i++) await put(sys, `agent:guest:tg:group:g${i}`, "guest", "group");
      const page = await listKeys(sys, MAIN, { limit: 3 });
      expect(page).toHaveLength(3);
      expect(page.every((k) => !k.startsWith("agent:guest:"))).toBe(true);
      // The caller's own cross-agent child stays listed (the guard lets it reach its descendants).
      expect(await listKeys(sys, MAIN, { limit: 20 })).toContain(XCHILD);
    });

    it("a label lookup in a denied agent is refused before any lookup", async () => {
      const r = await tool(sys, "sessions_send", GUEST, { label: "anything", agentId: "ops-a", message: "x" });
      expect(r).toMatchObject({ status: "forbidden", error: A2A_DENIED.send });
    });
  });
});

describe("sandboxed callers are clamped to their tree", () => {
  let sys: TestSystem;
  beforeAll(async () => {
    sys = await visSystem({ sessions: { visibility: "all" }, agentToAgent: { enabled: true } });
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("list shows only the sessions it spawned, at any depth", async () => {
    expect(await listKeys(sys, MAIN, {}, true)).toEqual([CHILD, GRANDCHILD, XCHILD].sort());
    // The same caller unsandboxed sees everything.
    expect((await listKeys(sys, MAIN, {}, false)).length).toBe(8);
  });

  it("self and descendants are reachable; the rest is refused with the tree / cross-agent texts", async () => {
    await expectAllowed(sys, MAIN, ["current", CHILD, GRANDCHILD, XCHILD], true);
    await expectForbidden(sys, MAIN, [GROUP], treeText, true);
    await expectForbidden(sys, CHILD, [MAIN, GROUP], treeText, true);
    await expectForbidden(sys, MAIN, [OPS_A], crossText, true);
  });

  it("input that is neither a stored key nor a sessionId is not found: no session is made up for it", async () => {
    for (const ref of ["random-slug", "../../etc/passwd"]) {
      const notFound = {
        status: "error",
        error: `Session not found: ${ref} (use the full sessionKey from sessions_list)`,
      };
      expect(await tool(sys, "sessions_history", MAIN, { sessionKey: ref })).toEqual(notFound);
      expect(await tool(sys, "session_status", MAIN, { sessionKey: ref })).toMatchObject(notFound);
      expect(
        await tool(sys, "sessions_send", MAIN, { sessionKey: ref, message: "x", timeoutSeconds: 0 }),
      ).toMatchObject(notFound);
      expect(await sys.svc.sessions.get(`agent:main:${ref}`)).toBeNull();
    }
  });

  it("an unknown sessionId is not confirmed to a sandboxed caller", async () => {
    const id = randomUUID();
    expect(await tool(sys, "sessions_history", MAIN, { sessionKey: id }, { sandboxed: true })).toEqual({
      status: "forbidden",
      error: `Session not visible from this sandboxed agent session: ${id}`,
    });
    expect(await tool(sys, "sessions_history", MAIN, { sessionKey: id })).toEqual({
      status: "error",
      error: `Session not found: ${id} (use the full sessionKey from sessions_list)`,
    });
    const status = await tool(sys, "session_status", MAIN, { sessionKey: id }, { sandboxed: true });
    expect(status).toMatchObject({
      status: "forbidden",
      error: `Session not visible from this sandboxed agent session: ${id}`,
    });
    const send = await tool(sys, "sessions_send", MAIN, { sessionKey: id, message: "x" }, { sandboxed: true });
    expect(send).toMatchObject({
      status: "forbidden",
      error: `Session not visible from this sandboxed agent session: ${id}`,
    });
  });

  it("an agent configured sandboxed is clamped without the flag in the body", async () => {
    const s2 = await visSystem({ sessions: { visibility: "all" }, agentToAgent: { enabled: true } });
    try {
      // The session entry says it runs sandboxed (as a sandboxed agent's sessions do).
      await s2.svc.sessions.upsert(MAIN, { agentId: "main", kind: "main" }, { sandboxed: true });
      expect(await listKeys(s2, MAIN)).toEqual([CHILD, GRANDCHILD, XCHILD].sort());
      expect(await attempt(s2, "history", MAIN, GROUP)).toEqual({ status: "forbidden", error: treeText("history") });
      // An explicit sandboxed:false in the body wins.
      expect(await attempt(s2, "history", MAIN, GROUP, false)).toBeNull();
    } finally {
      await s2.close();
    }
  });

  it("with sandbox.sessionToolsVisibility all there is no clamp", async () => {
    const s3 = await visSystem(
      { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      { agents: { defaults: { sandbox: { sessionToolsVisibility: "all" } } } },
    );
    try {
      expect((await listKeys(s3, MAIN, {}, true)).length).toBe(8);
      await expectAllowed(s3, MAIN, [GROUP, OPS_A], true);
    } finally {
      await s3.close();
    }
  });

  it("self visibility is clamped to tree too (OpenClaw's rule)", async () => {
    const s4 = await visSystem({ sessions: { visibility: "self" } });
    try {
      expect(await attempt(s4, "history", MAIN, CHILD, true)).toBeNull();
      expect(await attempt(s4, "history", MAIN, GROUP, true)).toEqual({
        status: "forbidden",
        error: treeText("history"),
      });
    } finally {
      await s4.close();
    }
  });
});

describe("a sandboxed caller cannot probe labels and sessionIds of sessions it cannot see", () => {
  // GROUP (not spawned by MAIN) carries the label `payroll`; CHILD (spawned by MAIN) `kid`.
  let sys: TestSystem;
  const idOf = async (key: string) => (await sys.svc.sessions.get(key))!.sessionId;
  const send = (caller: string, target: Record<string, unknown>, sandboxed?: boolean) =>
    tool(
      sys,
      "sessions_send",
      caller,
      { ...target, message: "hi", timeoutSeconds: 0 },
      sandboxed === undefined ? {} : { sandboxed },
    );
  /** The answer without its (always fresh) runId. */
  const bare = ({ runId, ...rest }: Record<string, unknown>) => {
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);
    return rest;
  };
  beforeAll(async () => {
    sys = await visSystem({ sessions: { visibility: "all" }, agentToAgent: { enabled: true } });
    await sys.svc.sessions.upsert(GROUP, { agentId: "main", kind: "group" }, { label: "payroll" });
    await sys.svc.sessions.upsert(CHILD, { agentId: "main", kind: "other" }, { label: "kid" });
  });
  afterAll(async () => {
    await sys?.close();
  });

  it("restricted to spawned: another session's label answers as a label nobody has, with no key", async () => {
    const missing = { status: "forbidden", error: "Session not visible from this sandboxed agent session." };
    expect(bare(await send(MAIN, { label: "payroll" }, true))).toEqual(missing);
    expect(bare(await send(MAIN, { label: "nope" }, true))).toEqual(missing);
    // Its own descendant is found by label; unsandboxed (visibility all) the other one is too.
    expect(await send(MAIN, { label: "kid" }, true)).toMatchObject({ status: "accepted", sessionKey: CHILD });
    expect(await send(MAIN, { label: "payroll" }, false)).toMatchObject({ status: "accepted", sessionKey: GROUP });
  });

  it("restricted to spawned: another session's sessionId answers as an unknown one, in every tool", async () => {
    for (const id of [await idOf(GROUP), randomUUID()]) {
      const missing = { status: "forbidden", error: `Session not visible from this sandboxed agent session: ${id}` };
      expect(bare(await send(MAIN, { sessionKey: id }, true))).toEqual(missing);
      expect(await tool(sys, "sessions_history", MAIN, { sessionKey: id }, { sandboxed: true })).toEqual(missing);
      expect(await tool(sys, "session_status", MAIN, { sessionKey: id }, { sandboxed: true })).toEqual(missing);
    }
    const child = await idOf(CHILD);
    expect(await send(MAIN, { sessionKey: child }, true)).toMatchObject({ status: "accepted", sessionKey: CHILD });
    expect(await tool(sys, "sessions_history", MAIN, { sessionKey: child }, { sandboxed: true })).toMatchObject({
      sessionKey: CHILD,
    });
  });

  it("a sandboxed sub-agent (clamped to its tree) cannot tell a hidden session from a missing one either", async () => {
    const missingLabel = { status: "forbidden", error: "Session not visible from this sandboxed agent session." };
    expect(bare(await send(CHILD, { label: "payroll" }, true))).toEqual(missingLabel);
    expect(bare(await send(CHILD, { label: "nope" }, true))).toEqual(missingLabel);
    for (const id of [await idOf(GROUP), await idOf(MAIN), randomUUID()]) {
      const missing = {
        status: "error",
        error: `Session not found: ${id} (use the full sessionKey from sessions_list)`,
      };
      expect(bare(await send(CHILD, { sessionKey: id }, true))).toEqual(missing);
      expect(await tool(sys, "sessions_history", CHILD, { sessionKey: id }, { sandboxed: true })).toEqual(missing);
      expect(await tool(sys, "session_status", CHILD, { sessionKey: id }, { sandboxed: true })).toEqual(missing);
    }
    const grand = await idOf(GRANDCHILD);
    expect(await send(CHILD, { sessionKey: grand }, true)).toMatchObject({
      status: "accepted",
      sessionKey: GRANDCHILD,
    });
  });

  it("a target the guard refuses is never named back, even to an unsandboxed caller", async () => {
    const s2 = await visSystem({ sessions: { visibility: "tree" } });
    try {
      await s2.svc.sessions.upsert(GROUP, { agentId: "main", kind: "group" }, { label: "payroll" });
      const id = (await s2.svc.sessions.get(GROUP))!.sessionId;
      for (const target of [{ label: "payroll" }, { sessionKey: id }, { sessionKey: GROUP }]) {
        const r = await tool(s2, "sessions_send", MAIN, { ...target, message: "hi", timeoutSeconds: 0 });
        expect(bare(r), JSON.stringify(target)).toEqual({ status: "forbidden", error: treeText("send") });
      }
      // A thread session it cannot see gets the guard's answer, not the thread refusal naming it.
      const thread = "agent:main:tg:group:g1:thread:7";
      await put(s2, thread, "main", "group", { label: "topic" });
      const r = await tool(s2, "sessions_send", MAIN, { label: "topic", message: "hi", timeoutSeconds: 0 });
      expect(bare(r)).toEqual({ status: "forbidden", error: treeText("send") });
    } finally {
      await s2.close();
    }
  });
});

describe("scope global", () => {
  it("tools see the global session as `main`, never as `global`", async () => {
    const sys = await startTestSystem(
      toolsConfig({ session: { scope: "global" }, tools: { sessions: { visibility: "all" } } }),
    );
    try {
      const r = await sys.post("/v1/inbound", { channel: "tg", chatType: "dm", from: "5", text: "hi" });
      expect(r.body.sessionKey).toBe("global");
      await sys.rpc("agent.wait", { runId: r.body.runId, timeoutMs: 10_000 });
      const list = await tool(sys, "sessions_list", "global", {});
      expect(list.sessions.map((s: { key: string }) => s.key)).toEqual(["main"]);
      const hist = await tool(sys, "sessions_history", "global", { sessionKey: "main" });
      expect(hist.sessionKey).toBe("main");
      expect(hist.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);
    } finally {
      await sys.close();
    }
  });
});

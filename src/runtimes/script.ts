/**
 * `script` runtime (docs/concepts/config.md, "Runtimes"): deterministic rules for tests and demos.
 *
 * Rules are tried in order; the first whose `when` matches acts:
 *   1. `delayMs`  – abortable wait (an abort rejects at once with RunAbortedError, timer cleared);
 *   2. `fail`     – throws `new Error(<fail, templated>)` (after the delay, before any tool);
 *   3. `tools`    – session tools called in order through `input.tools.call`, every string in
 *                   `args` (deeply) templated just before its call, so later calls may use the
 *                   results of earlier ones; after a call that yielded the turn
 *                   (`sessions_yield`) the run stops there and answers `{reply: "", yielded}`;
 *   4. `reply`    – templated; a rule without `reply` answers "" (silent). `REPLY_SKIP`,
 *                   `ANNOUNCE_SKIP`, `NO_REPLY` are ordinary text here and pass through verbatim;
 *   5. `usage`    – copied to the output.
 * No matching rule: the reply is "" (silent; the worker treats it like any empty reply).
 *
 * Templating (`{{name}}`, whitespace inside the braces allowed, single pass — substituted text
 * is never expanded again):
 *   {{text}} {{sessionKey}} {{sessionId}} {{agentId}} {{runId}} {{step}} {{provenance}}
 *   {{prompt}} the text as a model would read it (marked when it came from another session)
 *   {{0}} whole regex match, {{1}} {{2}} … capture groups of the rule's `regex` ("" when absent)
 *   {{tool.N}} / {{tool.N.a.b}} result of this rule's N-th (0-based) tool call, or a dotted path
 *                into it (array indexes allowed); strings as-is, other values JSON-stringified,
 *                missing → "".
 * Unknown placeholders are left untouched.
 */
import type { ScriptRule } from "../config/schema.js";
import { RunAbortedError, type AgentRuntime, type RunInput, type RunOutput, type ToolCallResult } from "./types.js";
import { throwIfAborted, untilAborted } from "./abort.js";
import { runtimePromptText } from "./inter-session.js";

interface CompiledRule {
  readonly rule: ScriptRule;
  readonly regex: RegExp | undefined;
}

interface TemplateContext {
  readonly input: RunInput;
  /** Regex match of the acting rule (index 0 = whole match), empty when it has no regex. */
  readonly groups: readonly (string | undefined)[];
  /** Results of this rule's tool calls so far. */
  readonly toolResults: unknown[];
}

const PLACEHOLDER = /\{\{\s*([^{}]+?)\s*\}\}/g;

/**
 * Resolves after `ms`, or rejects with RunAbortedError(signal.reason) as soon as `signal`
 * aborts. The timer is cleared on abort and the abort listener removed on completion, so
 * nothing keeps the process alive or accumulates on a long-lived signal.
 */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new RunAbortedError(signal.reason));
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new RunAbortedError(signal.reason));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Waits for `promise` but gives up with RunAbortedError the moment `signal` aborts (the tool
 * invoker takes no signal, so a slow tool must not hold a killed run). A late rejection of the
 * abandoned promise is swallowed.
 */

function stringify(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value) ?? "";
  } catch {
    return String(value);
  }
}

function walk(value: unknown, path: readonly string[]): unknown {
  let cur = value;
  for (const part of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    if (!Object.hasOwn(cur, part)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

/** The value for one placeholder name, or undefined when the name is not known. */
function resolvePlaceholder(name: string, ctx: TemplateContext): string | undefined {
  const { input } = ctx;
  switch (name) {
    case "text":
      return input.text;
    case "prompt":
      return runtimePromptText(input);
    case "sessionKey":
      return input.sessionKey;
    case "sessionId":
      return input.sessionId;
    case "agentId":
      return input.agentId;
    case "runId":
      return input.runId;
    case "step":
      return input.step;
    case "provenance":
      return input.provenance;
  }
  if (/^\d+$/.test(name)) return ctx.groups[Number(name)] ?? "";
  if (name === "tool" || name.startsWith("tool.")) {
    const [, index, ...path] = name.split(".");
    if (index === undefined || !/^\d+$/.test(index)) return undefined;
    const i = Number(index);
    if (i >= ctx.toolResults.length) return "";
    return stringify(walk(ctx.toolResults[i], path));
  }
  return undefined;
}

function renderTemplate(template: string, ctx: TemplateContext): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => resolvePlaceholder(name, ctx) ?? whole);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== "object") return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Templating applied to every string value inside `value` (objects and arrays, any depth). */
function renderDeep(value: unknown, ctx: TemplateContext): unknown {
  if (typeof value === "string") return renderTemplate(value, ctx);
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, ctx));
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = renderDeep(v, ctx);
    return out;
  }
  return value;
}

export class ScriptRuntime implements AgentRuntime {
  readonly kind = "script";
  private readonly rules: readonly CompiledRule[];

  constructor(rules: readonly ScriptRule[]) {
    this.rules = rules.map((rule, i) => {
      let regex: RegExp | undefined;
      if (rule.when?.regex !== undefined) {
        try {
          regex = new RegExp(rule.when.regex);
        } catch (err) {
          throw new Error(
            `script rule #${i}: invalid regex ${JSON.stringify(rule.when.regex)}: ${(err as Error).message}`,
          );
        }
      }
      return { rule, regex };
    });
  }

  /** The first rule whose `when` holds for this input, with its regex match. */
  private match(input: RunInput): { rule: ScriptRule; groups: (string | undefined)[] } | undefined {
    for (const { rule, regex } of this.rules) {
      const when = rule.when;
      if (when?.provenance !== undefined && when.provenance !== input.provenance) continue;
      if (when?.step !== undefined && when.step !== input.step) continue;
      if (when?.contains !== undefined && !input.text.includes(when.contains)) continue;
      let groups: (string | undefined)[] = [];
      if (regex) {
        const m = regex.exec(input.text);
        if (!m) continue;
        groups = Array.from(m);
      }
      return { rule, groups };
    }
    return undefined;
  }

  async run(input: RunInput): Promise<RunOutput> {
    const { signal } = input;
    throwIfAborted(signal);
    const matched = this.match(input);
    if (!matched) return { reply: "" };
    const { rule, groups } = matched;
    const ctx: TemplateContext = { input, groups, toolResults: [] };

    if (rule.delayMs !== undefined && rule.delayMs > 0) await abortableDelay(rule.delayMs, signal);
    throwIfAborted(signal);

    if (rule.fail !== undefined) throw new Error(renderTemplate(rule.fail, ctx) || "script rule failed");

    const toolCalls: ToolCallResult[] = [];
    for (const tool of rule.tools ?? []) {
      throwIfAborted(signal);
      const args = renderDeep(tool.args ?? {}, ctx) as Record<string, unknown>;
      let result: unknown;
      try {
        result = await untilAborted(
          Promise.resolve().then(() => input.tools.call(tool.name, args)),
          signal,
        );
      } catch (err) {
        if (signal.aborted && !(err instanceof RunAbortedError)) throw new RunAbortedError(signal.reason);
        throw err;
      }
      toolCalls.push({ name: tool.name, args, result });
      ctx.toolResults.push(result);
      // sessions_yield ended the turn: no further tool, and the rule's reply is not said.
      const yielded = input.tools.yielded?.();
      if (yielded)
        return {
          reply: "",
          toolCalls,
          yielded,
          ...(rule.usage ? { usage: { input: rule.usage.input, output: rule.usage.output } } : {}),
        };
    }
    throwIfAborted(signal);

    const out: RunOutput = { reply: renderTemplate(rule.reply ?? "", ctx) };
    if (rule.usage) out.usage = { input: rule.usage.input, output: rule.usage.output };
    if (toolCalls.length > 0) out.toolCalls = toolCalls;
    return out;
  }
}

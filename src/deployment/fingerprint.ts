/**
 * A process's config fingerprint: the parts of the config that must agree across every process of
 * one deployment (one Redis prefix) for runs to mean the same thing wherever they land: which
 * agents exist, which is the default, each agent's runtime, and the settings that change what a
 * turn or a delivery does (send policy, resets, tools, sandboxing, channels…). A worker with
 * another agent list or another send policy would take a share of the jobs and handle them its
 * own way, one message in N (docs/concepts/deployment-identity.md). Pure functions; no I/O.
 */
import { createHash } from "node:crypto";
import { agentRuntime, defaultAgentId, isAgentSandboxed } from "../config/agents.js";
import type { Config, RuntimeConfig } from "../config/schema.js";

export interface RuntimeSummary {
  kind: RuntimeConfig["kind"];
  /** Short digest of the whole runtime config (rules, model, base URL…). */
  digest: string;
  /** What people recognise in a message: the model for openai, the rule count for script. */
  detail?: string;
}

export interface ConfigFingerprint {
  prefix: string;
  defaultAgent: string;
  /** `agents.defaults.runtime`: what an agent missing from the list runs. */
  defaultRuntime: RuntimeSummary;
  /**
   * Every agent this config knows (each listed one, and the default agent even when the list is
   * empty) with the runtime it actually runs (its own, or the default).
   */
  agents: Record<string, RuntimeSummary>;
  /**
   * The behaviour settings, by config path (`session.sendPolicy`, `channels.ops`…), each as a
   * short digest of its value; a setting left unset is absent. See `behaviourSettings`.
   * Absent in records written by versions before it was added.
   */
  settings?: Record<string, string>;
  /** Digest of `settings` alone. */
  settingsHash?: string;
  /** Digest of everything above but the prefix: equal hashes, same agents, runtimes and settings. */
  hash: string;
}

/** JSON with object keys sorted, so equal configs digest equally whatever the key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

const digest = (value: unknown): string => createHash("sha256").update(canonicalJson(value)).digest("hex").slice(0, 12);

export function summarizeRuntime(runtime: RuntimeConfig): RuntimeSummary {
  const detail =
    runtime.kind === "openai"
      ? runtime.model
      : runtime.kind === "script"
        ? `${runtime.rules.length} rule${runtime.rules.length === 1 ? "" : "s"}`
        : undefined;
  return { kind: runtime.kind, digest: digest(runtime), ...(detail ? { detail } : {}) };
}

/** Session settings that are storage housekeeping, not behaviour: may differ between processes. */
const SESSION_HOUSEKEEPING = new Set(["store", "maintenance"]);

/**
 * The settings besides agents and runtimes that change what a turn or a delivery does, by config
 * path, as found in `config` (defaults applied; unset optional ones left out):
 * - `session.*` but `store` and `maintenance` (scope, dmScope, mainKey, identityLinks, resets,
 *   triggers, sendPolicy, agentToAgent);
 * - `tools.*`; `agents.defaults.sandbox` and `agents.defaults.subagents`;
 * - per agent, `sandboxed` (when true) and its own `subagents` (when set);
 * - `transcripts.*`; each of `channels`; `commands.ownerAllowFrom`.
 * Ports, timeouts, limits, Redis and storage locations and OpenClaw keys that change nothing here
 * are left out: processes of one deployment may differ in those.
 */
function behaviourSettings(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config.session)) if (!SESSION_HOUSEKEEPING.has(k)) out[`session.${k}`] = v;
  for (const [k, v] of Object.entries(config.tools)) out[`tools.${k}`] = v;
  out["agents.defaults.sandbox"] = config.agents.defaults.sandbox;
  out["agents.defaults.subagents"] = config.agents.defaults.subagents;
  for (const a of config.agents.list) {
    if (isAgentSandboxed(config, a.id)) out[`agents.list[${a.id}].sandboxed`] = true;
    if (a.subagents !== undefined) out[`agents.list[${a.id}].subagents`] = a.subagents;
  }
  for (const [k, v] of Object.entries(config.transcripts)) out[`transcripts.${k}`] = v;
  for (const [id, c] of Object.entries(config.channels)) out[`channels.${id}`] = c;
  out["commands.ownerAllowFrom"] = config.commands.ownerAllowFrom;
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}

export function configFingerprint(config: Config): ConfigFingerprint {
  const agents: Record<string, RuntimeSummary> = {};
  const defaultAgent = defaultAgentId(config);
  // The default agent exists even when not listed (`main` with an empty list): left out, a config
  // that lists it explicitly would look like it added an agent.
  for (const id of [defaultAgent, ...config.agents.list.map((a) => a.id)])
    agents[id] = summarizeRuntime(agentRuntime(config, id));
  const settings: Record<string, string> = {};
  for (const [path, value] of Object.entries(behaviourSettings(config))) settings[path] = digest(value);
  const body = {
    defaultAgent,
    defaultRuntime: summarizeRuntime(config.agents.defaults.runtime),
    agents,
    settings,
    settingsHash: digest(settings),
  };
  return { prefix: config.redis.prefix, ...body, hash: digest(body) };
}

export function describeRuntime(r: RuntimeSummary | undefined): string {
  if (!r) return "not defined";
  return `${r.kind}${r.detail ? ` (${r.detail})` : ""} [${r.digest}]`;
}

/**
 * What differs between this process's fingerprint and the deployment's, one phrase each, from
 * this process's point of view: `agent "helper": here script (2 rules) […], deployment echo […]`.
 */
export function fingerprintDifferences(mine: ConfigFingerprint, theirs: ConfigFingerprint): string[] {
  const out: string[] = [];
  if (mine.defaultAgent !== theirs.defaultAgent)
    out.push(`default agent: here "${mine.defaultAgent}", deployment "${theirs.defaultAgent}"`);
  if (mine.defaultRuntime.digest !== theirs.defaultRuntime.digest) {
    out.push(
      `agents.defaults.runtime: here ${describeRuntime(mine.defaultRuntime)}, ` +
        `deployment ${describeRuntime(theirs.defaultRuntime)}`,
    );
  }
  const ids = [...new Set([...Object.keys(mine.agents), ...Object.keys(theirs.agents)])].sort();
  for (const id of ids) {
    const here = mine.agents[id];
    const there = theirs.agents[id];
    if (here && !there) out.push(`agent "${id}": configured here, not in the deployment`);
    else if (!here && there) out.push(`agent "${id}": in the deployment, missing here`);
    else if (here && there && here.digest !== there.digest)
      out.push(`agent "${id}": runtime here ${describeRuntime(here)}, deployment ${describeRuntime(there)}`);
  }
  out.push(...settingsDifferences(mine, theirs));
  return out;
}

/** `session.sendPolicy: differs (here [d1], deployment [d2])`, one per setting that differs. */
function settingsDifferences(mine: ConfigFingerprint, theirs: ConfigFingerprint): string[] {
  if (!mine.settings || !theirs.settings) {
    if (mine.settingsHash === theirs.settingsHash) return [];
    return [
      `settings: ${mine.settings ? "the deployment's" : "this"} process record has none ` +
        "(written by a Switchboard version that did not compare them)",
    ];
  }
  const out: string[] = [];
  const here = mine.settings;
  const there = theirs.settings;
  for (const path of [...new Set([...Object.keys(here), ...Object.keys(there)])].sort()) {
    const a = here[path];
    const b = there[path];
    if (a === b) continue;
    if (a === undefined) out.push(`${path}: not set here, set in the deployment [${b}]`);
    else if (b === undefined) out.push(`${path}: set here [${a}], not set in the deployment`);
    else out.push(`${path}: differs (here [${a}], deployment [${b}])`);
  }
  return out;
}

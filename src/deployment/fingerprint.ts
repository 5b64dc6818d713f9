/**
 * A process's config fingerprint: the parts of the config that must agree across every process of
 * one deployment (one Redis prefix) for runs to mean the same thing wherever they land: which
 * agents exist, which is the default, and each agent's runtime. A worker with another agent list
 * would take a share of the runs queue and answer them its own way (docs/concepts/deployment-identity.md).
 * Pure functions; no I/O.
 */
import { createHash } from "node:crypto";
import { agentRuntime, defaultAgentId } from "../config/agents.js";
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
  /** Every listed agent with the runtime it actually runs (its own, or the default). */
  agents: Record<string, RuntimeSummary>;
  /** Digest of everything above but the prefix: equal hashes, same agents and runtimes. */
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

export function configFingerprint(config: Config): ConfigFingerprint {
  const agents: Record<string, RuntimeSummary> = {};
  for (const a of config.agents.list) agents[a.id] = summarizeRuntime(agentRuntime(config, a.id));
  const body = {
    defaultAgent: defaultAgentId(config),
    defaultRuntime: summarizeRuntime(config.agents.defaults.runtime),
    agents,
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
  return out;
}

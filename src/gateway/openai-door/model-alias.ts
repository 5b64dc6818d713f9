/**
 * Which agent a chat-completions `model` names. The model field picks an agent, not an LLM:
 * the agent's own runtime decides the model it runs.
 *
 *   "<agentId>", "switchboard/<agentId>", "openclaw/<agentId>", "openclaw:<agentId>", "agent:<agentId>"
 *   "openclaw", "openclaw/default", "switchboard", "switchboard/default", or none → the default agent
 *
 * An agent literally called `default` wins over the alias.
 */
import { defaultAgentId, findAgent } from "../../config/agents.js";
import type { Config } from "../../config/schema.js";

const DEFAULT_ALIASES = new Set(["", "openclaw", "switchboard", "openclaw/default", "switchboard/default"]);
const PREFIXED = /^(?:switchboard\/|openclaw[/:]|agent:)?([a-z0-9][a-z0-9_-]{0,63})$/;

/** Every agent the deployment knows: the configured list plus the default agent. */
export function knownAgentIds(config: Config): string[] {
  return [...new Set([defaultAgentId(config), ...config.agents.list.map((a) => a.id)])];
}

function isKnown(config: Config, id: string): boolean {
  return id === defaultAgentId(config) || findAgent(config, id) !== undefined;
}

/** The agent `model` names, or undefined when it names none this deployment has. */
export function agentForModel(config: Config, model: string | undefined): string | undefined {
  return modelChoice(config, model)?.agentId;
}

/**
 * The agent `model` names and whether it names it outright (`named`: `"ops"`, `"switchboard/ops"`,
 * …) or only by a default alias (`"openclaw/default"`, none), which asks for no agent in
 * particular. Undefined when it names no agent this deployment has.
 */
export function modelChoice(
  config: Config,
  model: string | undefined,
): { agentId: string; named: boolean } | undefined {
  const m = (model ?? "").trim().toLowerCase();
  const named = PREFIXED.exec(m)?.[1];
  if (named && isKnown(config, named)) return { agentId: named, named: true };
  if (DEFAULT_ALIASES.has(m)) return { agentId: defaultAgentId(config), named: false };
  return undefined;
}

/** The ids `GET /v1/models` lists: one per agent, and OpenClaw's name of the default agent. */
export function modelIds(config: Config): string[] {
  return [...knownAgentIds(config).map((id) => `switchboard/${id}`), "openclaw/default"];
}

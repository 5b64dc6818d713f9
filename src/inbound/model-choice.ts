/**
 * `/new <model> …` (OpenClaw's session-reset model choice): the words after the trigger may
 * start with a model, named as `provider/model`, as `provider model`, by an alias, by its bare
 * model id, or — fuzzily — by a provider that has exactly one model or a long enough (≥ 6
 * characters) unique prefix. The catalog is every model the config names: the entries of
 * `agents.defaults.models` (with their aliases) and the models of openai-kind runtimes.
 * The consumed words are removed from the text; everything else is left as written. Pure.
 */
import type { Config } from "../config/schema.js";

export interface ModelCatalogEntry {
  provider?: string;
  model: string;
  alias?: string;
}

export interface ModelChoice {
  choice?: ModelCatalogEntry;
  /** The text with the consumed model words removed (trimmed). */
  rest: string;
}

function entryOf(id: string, alias?: string): ModelCatalogEntry {
  const slash = id.indexOf("/");
  const base =
    slash > 0 && slash < id.length - 1 ? { provider: id.slice(0, slash), model: id.slice(slash + 1) } : { model: id };
  return alias ? { ...base, alias } : base;
}

const idOf = (e: ModelCatalogEntry): string => (e.provider ? `${e.provider}/${e.model}` : e.model);

export function modelCatalog(config: Config): ModelCatalogEntry[] {
  const byId = new Map<string, ModelCatalogEntry>();
  for (const [id, opts] of Object.entries(config.agents.defaults.models ?? {}))
    byId.set(id.toLowerCase(), entryOf(id, opts.alias));
  for (const a of [{ runtime: config.agents.defaults.runtime }, ...config.agents.list]) {
    if (a.runtime?.kind === "openai" && !byId.has(a.runtime.model.toLowerCase()))
      byId.set(a.runtime.model.toLowerCase(), entryOf(a.runtime.model));
  }
  return [...byId.values()];
}

function unique(list: ModelCatalogEntry[]): ModelCatalogEntry | undefined {
  const distinct = [...new Map(list.map((e) => [idOf(e).toLowerCase(), e])).values()];
  return distinct.length === 1 ? distinct[0] : undefined;
}

export function resolveModelChoice(remainder: string, catalog: readonly ModelCatalogEntry[]): ModelChoice {
  const text = remainder.trim();
  const m = /^(\S+)(?:\s+(\S+))?/.exec(text);
  if (!m || catalog.length === 0) return { rest: text };
  const first = (m[1] ?? "").toLowerCase();
  const second = m[2]?.toLowerCase();
  const lower = (s: string | undefined) => (s ?? "").toLowerCase();
  const afterFirst = () => text.slice((m[1] ?? "").length).trim();
  const isProvider = catalog.some((e) => lower(e.provider) === first);

  // `provider model`
  if (isProvider && second !== undefined) {
    const hit = catalog.find((e) => lower(e.provider) === first && lower(e.model) === second);
    if (hit) return { choice: hit, rest: text.slice(m[0].length).trim() };
  }
  // `provider/model`, an alias, or a bare model id that only one provider has
  const exact = catalog.find((e) => idOf(e).toLowerCase() === first || lower(e.alias) === first);
  if (exact) return { choice: exact, rest: afterFirst() };
  const bare = unique(catalog.filter((e) => lower(e.model) === first));
  if (bare) return { choice: bare, rest: afterFirst() };
  // fuzzy: a provider with one model, or a long unique prefix
  if (isProvider) {
    const only = unique(catalog.filter((e) => lower(e.provider) === first));
    if (only) return { choice: only, rest: afterFirst() };
  }
  if (first.length >= 6) {
    const prefixed = unique(
      catalog.filter((e) => [idOf(e), e.model, e.alias ?? ""].some((s) => s.toLowerCase().startsWith(first))),
    );
    if (prefixed) return { choice: prefixed, rest: afterFirst() };
  }
  return { rest: text };
}

/**
 * Explicit reset triggers (`/new`, `/reset`), the `/new <model>` hint and the greeting turn
 * (docs/concepts/sessions.md, "Reset triggers"). Pure: no I/O.
 */
import { hostTimeZone } from "./reset-policy.js";

export const DEFAULT_RESET_TRIGGERS: readonly string[] = ["/new", "/reset"];

export type ResetTriggerMatch =
  | { triggered: false }
  | {
      triggered: true;
      /** The configured trigger that matched, exactly as configured. */
      trigger: string;
      /** The trigger without its leading `/`, lowercased: "new", "reset", or a custom name. */
      command: string;
      /** Text after the trigger, original casing kept, trimmed; "" for a bare trigger. */
      remainder: string;
    };

/**
 * The triggers in force: OpenClaw's `/new` and `/reset` always, plus any configured ones
 * (`resetTriggers: ["/fresh"]` adds `/fresh`; it does not take `/new` away). Duplicates dropped.
 */
export function effectiveResetTriggers(configured: readonly string[] = []): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const t of [...DEFAULT_RESET_TRIGGERS, ...configured]) {
    const key = t.trim().toLowerCase();
    if (!key || seen.has(key)) continue;
    seen.add(key);
    out.push(t.trim());
  }
  return out;
}

// `<@U123>`, `<@!123>`, `<@&role>` (Slack/Discord), `@name` (Telegram, Matrix…), with an optional `,`/`:`.
const LEADING_MENTIONS_RE = /^(?:\s*(?:<@[!&]?[^>\s]+>|@[\w.-]+)[,:]?)+\s*/;

/**
 * Group messages usually address the bot first: `"<@bot> /new take notes"`. The command text
 * of a group message is its body with those leading mentions removed (OpenClaw strips mentions
 * before looking for triggers in groups). DMs are left as they are.
 */
export function commandTextOf(text: string, chatType: string): string {
  if (chatType !== "group" && chatType !== "channel") return text;
  return text.replace(LEADING_MENTIONS_RE, "");
}

/**
 * Does `text` start with one of `triggers`? Case-insensitive; leading and trailing whitespace is
 * ignored. A bare trigger matches with remainder ""; a trigger followed by whitespace matches
 * with the rest as remainder; a slash trigger may carry a bot suffix (`/new@my_bot`); anything
 * else (e.g. `/newer` for `/new`) does not match. When
 * several triggers match, the longest wins (so `/new` and `/new-chat` can coexist).
 */
/** `@<bot username>` right after a slash trigger (Telegram's username alphabet). */
const BOT_SUFFIX = /^@[A-Za-z0-9_]+/;

export function parseResetTrigger(
  text: string,
  triggers: readonly string[] = DEFAULT_RESET_TRIGGERS,
): ResetTriggerMatch {
  const body = text.trim();
  if (!body) return { triggered: false };
  const ordered = triggers
    .map((t) => t.trim())
    .filter((t) => t.length > 0)
    .sort((a, b) => b.length - a.length);
  for (const trigger of ordered) {
    if (body.length < trigger.length) continue;
    if (body.slice(0, trigger.length).toLowerCase() !== trigger.toLowerCase()) continue;
    // Telegram clients address a command to a bot in groups: `/new@my_bot`, as chat commands accept.
    const suffix = trigger.startsWith("/") ? (BOT_SUFFIX.exec(body.slice(trigger.length))?.[0] ?? "") : "";
    const end = trigger.length + suffix.length;
    const next = body.charAt(end);
    if (next !== "" && !/\s/.test(next)) continue;
    return {
      triggered: true,
      trigger,
      command: trigger.replace(/^\/+/, "").toLowerCase(),
      remainder: body.slice(end).trim(),
    };
  }
  return { triggered: false };
}

export interface ModelHint {
  /** The matched entry of `knownModels`, as given there. */
  model?: string;
  /** The remainder with the consumed model tokens removed (trimmed). */
  rest: string;
}

/**
 * Does the remainder of `/new <remainder>` start with a model choice? (docs/concepts/sessions.md,
 * "Reset triggers"). `knownModels` holds ids and aliases (`gpt-5`, `minimax/m2.7`, `fast`). Tried
 * in order, case-insensitive:
 * 1. `<provider> <model>` where `<provider>/<model>` is known ⇒ that model, two tokens consumed;
 * 2. the first token is a known entry, or the model part of exactly one known
 *    `provider/model` ⇒ that model;
 * 3. fuzzy: the first token is ≥ 6 characters and exactly one known entry (or its model
 *    part) starts with it ⇒ that model (so `minimax summarize` picks `minimax/m2.7` when it is
 *    the only minimax model).
 * Otherwise no model and the remainder is returned unchanged (trimmed).
 */
export function parseNewModelHint(remainder: string, knownModels: readonly string[]): ModelHint {
  const text = remainder.trim();
  const m = /^(\S+)(?:(\s+)(\S+))?/.exec(text);
  if (!m || knownModels.length === 0) return { rest: text };
  const first = m[1] ?? "";
  const second = m[3];
  const firstLower = first.toLowerCase();
  const afterFirst = (): string => text.slice(first.length).trim();
  const known = knownModels.filter((k) => k.trim().length > 0);

  // 1. provider + model as two tokens
  if (second !== undefined && !first.includes("/")) {
    const combined = `${firstLower}/${second.toLowerCase()}`;
    const hit = known.find((k) => k.toLowerCase() === combined);
    if (hit) return { model: hit, rest: text.slice(m[0].length).trim() };
  }

  // 2. exact id / alias / provider/model, then a unique bare model part
  const exact = known.find((k) => k.toLowerCase() === firstLower);
  if (exact) return { model: exact, rest: afterFirst() };
  const byModelPart = unique(known.filter((k) => modelPart(k) === firstLower));
  if (byModelPart) return { model: byModelPart, rest: afterFirst() };

  // 3. fuzzy prefix, only for long enough tokens
  if (first.length >= 6) {
    const prefixed = unique(
      known.filter((k) => k.toLowerCase().startsWith(firstLower) || (modelPart(k)?.startsWith(firstLower) ?? false)),
    );
    if (prefixed) return { model: prefixed, rest: afterFirst() };
  }
  return { rest: text };
}

function modelPart(id: string): string | undefined {
  const i = id.indexOf("/");
  return i > 0 && i < id.length - 1 ? id.slice(i + 1).toLowerCase() : undefined;
}

function unique(list: string[]): string | undefined {
  const distinct = [...new Set(list)];
  return distinct.length === 1 ? distinct[0] : undefined;
}

/** The fixed greeting instruction used for a bare `/new` or `/reset`. */
export const GREETING_PROMPT =
  "A new session was started via /new or /reset. If runtime-provided startup context is included for this " +
  "first turn, use it before responding to the user. Then greet the user in your configured persona, " +
  "if one is provided. Be yourself - use your defined voice, mannerisms, and mood. " +
  "Keep it to 1-3 sentences and ask what they want to do. If the runtime model differs from default_model in " +
  "the system prompt, mention the default model. Do not mention internal steps, files, tools, or reasoning.";

/** The greeting turn's user text: the fixed prompt plus a `Current time: …` line. */
export function greetingPrompt(now: number, timeZone: string = hostTimeZone()): string {
  return `${GREETING_PROMPT}\n${currentTimeLine(now, timeZone)}`;
}

/**
 * `Current time: Tuesday, March 3rd, 2026 - 9:00 AM (America/New_York) / 2026-03-03 14:00 UTC`
 */
export function currentTimeLine(now: number, timeZone: string = hostTimeZone()): string {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    weekday: "long",
    month: "long",
    day: "numeric",
    year: "numeric",
    hour: "numeric",
    minute: "2-digit",
    hour12: true,
  }).formatToParts(new Date(now));
  const get = (type: Intl.DateTimeFormatPartTypes): string => parts.find((p) => p.type === type)?.value ?? "";
  const day = Number(get("day"));
  const local =
    `${get("weekday")}, ${get("month")} ${day}${ordinalSuffix(day)}, ` +
    `${get("year")} - ${get("hour")}:${get("minute")} ${get("dayPeriod").toUpperCase()}`;
  const iso = new Date(now).toISOString();
  const utc = `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
  return `Current time: ${local} (${timeZone}) / ${utc}`;
}

function ordinalSuffix(n: number): string {
  const mod100 = n % 100;
  if (mod100 >= 11 && mod100 <= 13) return "th";
  switch (n % 10) {
    case 1:
      return "st";
    case 2:
      return "nd";
    case 3:
      return "rd";
    default:
      return "th";
  }
}

/**
 * Session freshness (docs/concepts/sessions.md, "Freshness"; OpenClaw's `evaluateSessionFreshness`). Pure: no I/O.
 *
 * - daily: stale iff `updatedAt` < the most recent daily boundary ≤ now.
 * - idle:  stale iff `now > updatedAt + idleMinutes` (strict); `idleMinutes` 0 ⇒ never.
 * - both apply in daily mode when idleMinutes is set ("whichever expires first").
 * - when both are stale the reason is `idle`.
 * - mode `off` ⇒ always fresh.
 *
 * The daily boundary is `atHour:00:00.000` local time in the policy's IANA zone (default: the
 * host's), computed with `Intl` only. On a day where that wall time does not exist (spring
 * forward) the boundary is the first instant after the gap; when it occurs twice (fall back)
 * it is the first occurrence. In other words: the first instant at which the local clock of
 * that calendar day reads atHour:00 or later.
 */
import { DEFAULT_RESET_AT_HOUR, hostTimeZone, type ResetPolicy } from "./reset-policy.js";

export type StaleReason = "daily" | "idle";

export interface FreshnessArgs {
  updatedAt: number;
  now: number;
  policy: ResetPolicy;
}

export interface Freshness {
  fresh: boolean;
  /** The most recent daily boundary ≤ now (daily mode only). */
  dailyResetAt?: number;
  /** `updatedAt + idleMinutes` (when idleMinutes > 0). Stale once now is past it. */
  idleExpiresAt?: number;
  /** Why the session is stale; `idle` wins when both apply. Absent when fresh. */
  staleReason?: StaleReason;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

export function evaluateFreshness({ updatedAt, now, policy }: FreshnessArgs): Freshness {
  if (policy.mode === "off") return { fresh: true };
  const out: Freshness = { fresh: true };
  if (policy.mode === "daily") {
    out.dailyResetAt = mostRecentDailyBoundary(now, policyHour(policy), policy.timezone);
  }
  const idle = idleMs(policy);
  if (idle !== undefined) out.idleExpiresAt = updatedAt + idle;

  const staleDaily = out.dailyResetAt !== undefined && updatedAt < out.dailyResetAt;
  const staleIdle = out.idleExpiresAt !== undefined && now > out.idleExpiresAt;
  if (staleIdle) out.staleReason = "idle";
  else if (staleDaily) out.staleReason = "daily";
  out.fresh = !(staleDaily || staleIdle);
  return out;
}

/**
 * The earliest instant (epoch ms) at which a session last updated at `updatedAt` is stale
 * under `policy`, or undefined when it never goes stale by time. For every `now`:
 * `evaluateFreshness({updatedAt, now, policy}).fresh === (now < staleAt(...))`.
 */
export function staleAt({ updatedAt, policy }: { updatedAt: number; policy: ResetPolicy }): number | undefined {
  if (policy.mode === "off") return undefined;
  let at: number | undefined;
  if (policy.mode === "daily") at = nextDailyBoundary(updatedAt, policyHour(policy), policy.timezone);
  const idle = idleMs(policy);
  if (idle !== undefined) {
    const idleAt = updatedAt + idle + 1; // strict `now > updatedAt + idle`
    at = at === undefined ? idleAt : Math.min(at, idleAt);
  }
  return at;
}

/** The most recent daily boundary (atHour:00 local in `timeZone`) that is ≤ `now`. */
export function mostRecentDailyBoundary(now: number, atHour: number, timeZone?: string): number {
  return dailyInterval(now, atHour, timeZone).prev;
}

/** The first daily boundary (atHour:00 local in `timeZone`) strictly after `now`. */
export function nextDailyBoundary(now: number, atHour: number, timeZone?: string): number {
  return dailyInterval(now, atHour, timeZone).next;
}

/** Two consecutive daily boundaries: no other lies in between. */
interface DailyInterval {
  prev: number;
  next: number;
}

/**
 * The intervals found so far, per hour and zone, most recent first. Finding one asks Intl for
 * the local time of a dozen instants (about 60 µs), and every freshness check needs one (a
 * session's stale instant after each turn, each message's check, each swept session), nearly
 * always the current day's: so each is found once and then looked up. A handful per zone covers
 * the days sessions were last active in; older ones are found again.
 */
const intervals = new Map<string, DailyInterval[]>();
const INTERVALS_KEPT = 8;

/** Forget the intervals found (tests compare a found interval with one looked up). */
export function forgetDailyIntervals(): void {
  intervals.clear();
}

/** The boundaries `prev` ≤ `t` < `next` of the daily reset at `atHour` in `timeZone`. */
function dailyInterval(t: number, atHour: number, timeZone?: string): DailyInterval {
  const tz = timeZone ?? hostTimeZone();
  const hour = normaliseHour(atHour);
  const key = `${hour}|${tz}`;
  let known = intervals.get(key);
  if (known) for (const iv of known) if (iv.prev <= t && t < iv.next) return iv;
  let prev: number | undefined;
  let next: number | undefined;
  for (const b of boundariesAround(t, hour, tz)) {
    if (b <= t && (prev === undefined || b > prev)) prev = b;
    if (b > t && (next === undefined || b < next)) next = b;
  }
  // boundariesAround covers local dates D-1..D+2 of `t`: D-1's boundary is ≤ t, D+2's is > t.
  if (prev === undefined) throw new Error(`no daily boundary found before ${t} in ${tz}`);
  if (next === undefined) throw new Error(`no daily boundary found after ${t} in ${tz}`);
  const found = { prev, next };
  if (!known) intervals.set(key, (known = []));
  known.unshift(found);
  if (known.length > INTERVALS_KEPT) known.pop();
  return found;
}

/**
 * The instant of `hour`:00 local time on the calendar date `year-month-day` in `timeZone`:
 * the first instant at which the local clock of that date reads hour:00 or later.
 */
export function zonedDateHourToInstant(
  year: number,
  month: number,
  day: number,
  hour: number,
  timeZone: string,
): number {
  const wall = Date.UTC(year, month - 1, day, hour);
  const offsets = new Set<number>([
    offsetAt(wall - DAY_MS, timeZone),
    offsetAt(wall, timeZone),
    offsetAt(wall + DAY_MS, timeZone),
  ]);
  let first: number | undefined;
  for (const o of offsets) {
    const t = wall - o;
    if (t + offsetAt(t, timeZone) === wall && (first === undefined || t < first)) first = t;
  }
  if (first !== undefined) return first;

  // The wall time falls in a gap: find the transition, the first instant whose local time is
  // past `wall`. Local time is monotonic across [wall - maxOffset, wall - minOffset] here.
  let lo = wall - Math.max(...offsets); // local time < wall
  let hi = wall - Math.min(...offsets); // local time > wall
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid + offsetAt(mid, timeZone) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

// ---------------------------------------------------------------------------------------------

function policyHour(policy: ResetPolicy): number {
  return policy.atHour ?? DEFAULT_RESET_AT_HOUR;
}

function idleMs(policy: ResetPolicy): number | undefined {
  const m = policy.idleMinutes;
  if (m === undefined || !Number.isFinite(m) || m <= 0) return undefined;
  return m * MINUTE_MS;
}

function normaliseHour(h: number): number {
  if (!Number.isFinite(h)) return DEFAULT_RESET_AT_HOUR;
  return Math.min(23, Math.max(0, Math.floor(h)));
}

/** Boundaries on the local dates D-1 .. D+2 around `t` (covers zones whose date goes backwards). */
function boundariesAround(t: number, hour: number, tz: string): number[] {
  const p = localParts(t, tz);
  const out: number[] = [];
  for (let delta = -1; delta <= 2; delta++) {
    const d = new Date(Date.UTC(p.year, p.month - 1, p.day + delta));
    out.push(zonedDateHourToInstant(d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), hour, tz));
  }
  return out;
}

interface LocalParts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
      era: "short",
    });
    formatters.set(timeZone, f);
  }
  return f;
}

function localParts(t: number, timeZone: string): LocalParts {
  const parts = formatterFor(timeZone).formatToParts(new Date(t));
  const get = (type: Intl.DateTimeFormatPartTypes): number => {
    const p = parts.find((x) => x.type === type);
    return p ? Number(p.value) : 0;
  };
  let year = get("year");
  const era = parts.find((x) => x.type === "era")?.value;
  if (era && /^b/i.test(era)) year = 1 - year; // 1 BC is year 0
  let hour = get("hour");
  if (hour === 24) hour = 0; // some ICU versions still print 24 for midnight
  return { year, month: get("month"), day: get("day"), hour, minute: get("minute"), second: get("second") };
}

/** Offset of `timeZone` at instant `t`: local wall time (as if UTC) minus the instant, in ms. */
function offsetAt(t: number, timeZone: string): number {
  const p = localParts(t, timeZone);
  const wall = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  const wholeSecond = Math.floor(t / 1000) * 1000;
  return wall - wholeSecond;
}

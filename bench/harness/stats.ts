/**
 * The arithmetic of the benchmark, free of I/O so it is unit-tested: medians, percentiles,
 * ratios, and how numbers are printed.
 */

/** Median of a non-empty list (mean of the two middle values for an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error("median of an empty list");
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100) of a non-empty list. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) throw new Error("percentile of an empty list");
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]!;
}

/** measured / baseline; NaN when the baseline is zero or missing (nothing to compare with). */
export function ratio(measured: number, baseline: number): number {
  return baseline > 0 && Number.isFinite(baseline) ? measured / baseline : Number.NaN;
}

/** A ratio as "0.43x": two decimals, whole tenths from 10x, two significant digits below 0.1x. */
export function formatRatio(r: number): string {
  if (!Number.isFinite(r)) return "n/a";
  if (r >= 10) return `${r.toFixed(1)}x`;
  if (r >= 0.1 || r === 0) return `${r.toFixed(2)}x`;
  return `${r.toPrecision(2)}x`;
}

/** A figure value: thousands separated, decimals only where they carry information. */
export function formatValue(v: number): string {
  if (!Number.isFinite(v)) return "n/a";
  const abs = Math.abs(v);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  return v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Items per second from a count and a duration in milliseconds. */
export function perSecond(count: number, elapsedMs: number): number {
  return elapsedMs > 0 ? (count / elapsedMs) * 1000 : Number.NaN;
}

/**
 * Throughput in the steady part of a run: the items that finished between the given lower
 * and upper percentiles of the finish times, divided by that span. Start-up and the tail
 * (the last sessions finishing alone) do not count. `notBefore` moves the window start later
 * (e.g. until every worker process was ready).
 */
export function steadyRate(finishTimes: readonly number[], lowP = 10, highP = 90, notBefore = -Infinity): number {
  if (finishTimes.length < 2) return Number.NaN;
  const s = [...finishTimes].sort((a, b) => a - b);
  const from = Math.max(percentile(s, lowP), notBefore);
  const to = percentile(s, highP);
  if (to <= from) return Number.NaN;
  const inWindow = s.filter((t) => t > from && t <= to).length;
  return perSecond(inWindow, to - from);
}

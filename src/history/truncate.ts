/**
 * Size limits for history output (docs/concepts/tools.md, "sessions_history"): text fields are cut to a number
 * of UTF-16 code units (what JavaScript's `length` counts, and what OpenClaw's 4 000-char limit means),
 * arrays of messages are capped by their JSON size in UTF-8 bytes (what goes over the wire).
 */

/** Appended to a cut text. The Unicode ellipsis matches OpenClaw's sessions_history output. */
export const TRUNCATION_SUFFIX = "\n…(truncated)…";

export interface TruncateResult {
  text: string;
  truncated: boolean;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/**
 * The first `maxUnits` UTF-16 units of `text`, one fewer when the cut would split a surrogate
 * pair (an emoji half is not a character and breaks JSON consumers that validate UTF-8).
 */
export function truncateUtf16Safe(text: string, maxUnits: number): string {
  const limit = Math.max(0, Math.floor(maxUnits));
  if (text.length <= limit) return text;
  let cut = limit;
  if (cut > 0 && isHighSurrogate(text.charCodeAt(cut - 1))) cut -= 1;
  return text.slice(0, cut);
}

/** Cuts `text` to `maxUnits` units (surrogate-safe) and appends TRUNCATION_SUFFIX when it was longer. */
export function truncateText(text: string, maxUnits: number): TruncateResult {
  if (text.length <= maxUnits) return { text, truncated: false };
  return { text: `${truncateUtf16Safe(text, maxUnits)}${TRUNCATION_SUFFIX}`, truncated: true };
}

/** UTF-8 byte length of `JSON.stringify(value)`; 0 for values JSON cannot represent (undefined, functions). */
export function jsonBytes(value: unknown): number {
  const json = JSON.stringify(value);
  return json === undefined ? 0 : Buffer.byteLength(json, "utf8");
}

export interface CapResult<T> {
  items: T[];
  /** JSON byte size of `items` as an array. */
  bytes: number;
}

/**
 * Drops the OLDEST items until the array's JSON size (2 brackets + Σ item bytes + commas) fits
 * `maxBytes`. The newest item is always kept, even when it alone is too big: the caller decides
 * what to do with that (sessions_history's hard cap). Each item is serialised once.
 */
export function capArrayByJsonBytes<T>(items: readonly T[], maxBytes: number): CapResult<T> {
  if (items.length === 0) return { items: [], bytes: 2 };
  // undefined array slots serialise as `null` (4 bytes) inside an array.
  const sizes = items.map((item) => jsonBytes(item) || 4);
  let total = 2 + sizes.reduce((sum, n) => sum + n, 0) + (items.length - 1);
  let start = 0;
  while (total > maxBytes && start < items.length - 1) {
    total -= (sizes[start] ?? 0) + 1; // the item and its comma
    start += 1;
  }
  return { items: items.slice(start), bytes: total };
}

/**
 * Well-formed text at the edges. A JavaScript string may hold a lone UTF-16 surrogate
 * ("\ud83d" with no partner). `JSON.stringify` writes it as the escape `\ud83d`, which is valid
 * JSON to V8 but is refused by Redis's cjson and cannot be encoded as UTF-8 (it becomes U+FFFD
 * on the wire, so a key hashed before and after storage no longer matches). Every string that
 * enters Switchboard (HTTP bodies, runtime replies) is therefore made well-formed first, with
 * `String.prototype.toWellFormed` semantics: each lone surrogate becomes U+FFFD.
 * See docs/concepts/text.md.
 */

/** `s` with every lone surrogate replaced by U+FFFD (the same string when already well-formed). */
export function wellFormed(s: string): string {
  return s.isWellFormed() ? s : s.toWellFormed();
}

/**
 * A deep copy of a JSON-like value whose strings (object keys included) are well-formed.
 * Values that need no change are returned as they are (no copy), so the common case costs one
 * walk. Keys are written as own data properties, so `"__proto__"` can never reach a prototype.
 */
export function wellFormedDeep<T>(value: T): T {
  return fix(value, 0) as T;
}

/** Deeper than this is not JSON anyone sends on purpose; it is left as is (JSON.parse built it). */
const MAX_DEPTH = 1000;

function fix(value: unknown, depth: number): unknown {
  if (typeof value === "string") return wellFormed(value);
  if (value === null || typeof value !== "object" || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v = fix(value[i], depth + 1);
      if (v !== value[i]) (out ??= value.slice())[i] = v;
    }
    return out ?? value;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return value;
  let changed = false;
  const entries = Object.entries(value).map(([k, v]) => {
    const fk = wellFormed(k);
    const fv = fix(v, depth + 1);
    if (fk !== k || fv !== v) changed = true;
    return [fk, fv] as const;
  });
  return changed ? Object.fromEntries(entries) : value;
}

/**
 * JSON for anything a Lua script will `cjson.decode`: the same text as `JSON.stringify`, with
 * lone surrogates replaced first. Only lone surrogates are written as `\udXXX` escapes by
 * `JSON.stringify` (pairs are written raw), so the cheap check finds every case; a false alarm
 * (a literal backslash-u in the text) only costs the deep walk.
 */
export function luaSafeJson(value: unknown): string {
  const json = JSON.stringify(value);
  return json.includes("\\ud") ? JSON.stringify(wellFormedDeep(value)) : json;
}

/**
 * Characters that identifiers and labels never need and that make text lie about itself.
 *
 * Session keys, agent ids, route ids and labels end up in Redis keys, file names, logs, tool
 * output read by models, and operators' terminals. Control characters break logs and terminals;
 * bidi overrides and isolates reorder what is displayed (`agent:main:\u202Eexe.txt` shows as
 * something else entirely); zero-width and other invisible format characters make two different
 * keys look the same, and Unicode tag characters smuggle invisible text to a model. None of them
 * has a legitimate use in an identifier, so they are refused with a message that names the
 * character and where it is, instead of being silently stripped (which would merge two keys).
 *
 * Two profiles: `identifier` (keys, ids) also refuses joiners, variation selectors and invisible
 * fillers; `label` (human-chosen names) keeps ZWJ/ZWNJ and variation selectors, which emoji
 * sequences and scripts such as Persian or Devanagari need. See docs/concepts/unsafe-text.md.
 *
 * Pure functions, no I/O.
 */

export type TextProfile = "identifier" | "label";

export interface UnsafeChar {
  /** UTF-16 index in the string as given (what `String.prototype.at` and JS slices use). */
  index: number;
  codePoint: number;
  /** The Unicode name (or control alias), e.g. `RIGHT-TO-LEFT OVERRIDE`. */
  name: string;
}

/** C0 control aliases, indexed by code point. */
const C0_NAMES = [
  "NULL",
  "START OF HEADING",
  "START OF TEXT",
  "END OF TEXT",
  "END OF TRANSMISSION",
  "ENQUIRY",
  "ACKNOWLEDGE",
  "BELL",
  "BACKSPACE",
  "CHARACTER TABULATION",
  "LINE FEED",
  "LINE TABULATION",
  "FORM FEED",
  "CARRIAGE RETURN",
  "SHIFT OUT",
  "SHIFT IN",
  "DATA LINK ESCAPE",
  "DEVICE CONTROL ONE",
  "DEVICE CONTROL TWO",
  "DEVICE CONTROL THREE",
  "DEVICE CONTROL FOUR",
  "NEGATIVE ACKNOWLEDGE",
  "SYNCHRONOUS IDLE",
  "END OF TRANSMISSION BLOCK",
  "CANCEL",
  "END OF MEDIUM",
  "SUBSTITUTE",
  "ESCAPE",
  "INFORMATION SEPARATOR FOUR",
  "INFORMATION SEPARATOR THREE",
  "INFORMATION SEPARATOR TWO",
  "INFORMATION SEPARATOR ONE",
];

/** Refused in every profile: single code points with their names. */
const ALWAYS: ReadonlyMap<number, string> = new Map([
  [0x7f, "DELETE"],
  [0x85, "NEXT LINE"],
  [0xad, "SOFT HYPHEN"],
  [0x061c, "ARABIC LETTER MARK"],
  [0x180e, "MONGOLIAN VOWEL SEPARATOR"],
  [0x200b, "ZERO WIDTH SPACE"],
  [0x200e, "LEFT-TO-RIGHT MARK"],
  [0x200f, "RIGHT-TO-LEFT MARK"],
  [0x2028, "LINE SEPARATOR"],
  [0x2029, "PARAGRAPH SEPARATOR"],
  [0x202a, "LEFT-TO-RIGHT EMBEDDING"],
  [0x202b, "RIGHT-TO-LEFT EMBEDDING"],
  [0x202c, "POP DIRECTIONAL FORMATTING"],
  [0x202d, "LEFT-TO-RIGHT OVERRIDE"],
  [0x202e, "RIGHT-TO-LEFT OVERRIDE"],
  [0x2060, "WORD JOINER"],
  [0x2061, "FUNCTION APPLICATION"],
  [0x2062, "INVISIBLE TIMES"],
  [0x2063, "INVISIBLE SEPARATOR"],
  [0x2064, "INVISIBLE PLUS"],
  [0x2066, "LEFT-TO-RIGHT ISOLATE"],
  [0x2067, "RIGHT-TO-LEFT ISOLATE"],
  [0x2068, "FIRST STRONG ISOLATE"],
  [0x2069, "POP DIRECTIONAL ISOLATE"],
  [0x206a, "INHIBIT SYMMETRIC SWAPPING"],
  [0x206b, "ACTIVATE SYMMETRIC SWAPPING"],
  [0x206c, "INHIBIT ARABIC FORM SHAPING"],
  [0x206d, "ACTIVATE ARABIC FORM SHAPING"],
  [0x206e, "NATIONAL DIGIT SHAPES"],
  [0x206f, "NOMINAL DIGIT SHAPES"],
  [0xfeff, "ZERO WIDTH NO-BREAK SPACE"],
  [0xfff9, "INTERLINEAR ANNOTATION ANCHOR"],
  [0xfffa, "INTERLINEAR ANNOTATION SEPARATOR"],
  [0xfffb, "INTERLINEAR ANNOTATION TERMINATOR"],
]);

/** Refused in identifiers only: invisible in a key, but needed by some human-written names. */
const IDENTIFIER_ONLY: ReadonlyMap<number, string> = new Map([
  [0x034f, "COMBINING GRAPHEME JOINER"],
  [0x115f, "HANGUL CHOSEONG FILLER"],
  [0x1160, "HANGUL JUNGSEONG FILLER"],
  [0x200c, "ZERO WIDTH NON-JOINER"],
  [0x200d, "ZERO WIDTH JOINER"],
  [0x3164, "HANGUL FILLER"],
  [0xffa0, "HALFWIDTH HANGUL FILLER"],
]);

function rangeName(cp: number, profile: TextProfile): string | undefined {
  if (cp < 0x20) return C0_NAMES[cp];
  if (cp >= 0x80 && cp <= 0x9f) return ALWAYS.get(cp) ?? "C1 CONTROL";
  if (cp >= 0xd800 && cp <= 0xdfff) return cp < 0xdc00 ? "LONE HIGH SURROGATE" : "LONE LOW SURROGATE";
  // Tag characters: invisible, used to hide instructions from people while models read them.
  if (cp >= 0xe0000 && cp <= 0xe007f) return "TAG CHARACTER";
  if (profile === "identifier") {
    if (cp >= 0xfe00 && cp <= 0xfe0f) return `VARIATION SELECTOR-${cp - 0xfe00 + 1}`;
    if (cp >= 0xe0100 && cp <= 0xe01ef) return `VARIATION SELECTOR-${cp - 0xe0100 + 17}`;
  }
  return undefined;
}

/** Name of `cp` if it is refused under `profile`, else undefined. */
export function unsafeCharName(cp: number, profile: TextProfile = "identifier"): string | undefined {
  return ALWAYS.get(cp) ?? (profile === "identifier" ? IDENTIFIER_ONLY.get(cp) : undefined) ?? rangeName(cp, profile);
}

export interface ScanOptions {
  profile?: TextProfile;
  /**
   * Skip leading and trailing whitespace (as `String.prototype.trim` sees it): for fields that
   * are trimmed before use, where a pasted trailing newline is harmless. Indexes still count
   * from the start of the string as given.
   */
  trimmed?: boolean;
}

/** The first refused character of `text`, or undefined when `text` is clean. */
export function findUnsafeChar(text: string, opts: ScanOptions = {}): UnsafeChar | undefined {
  const profile = opts.profile ?? "identifier";
  const start = opts.trimmed ? text.length - text.trimStart().length : 0;
  const end = opts.trimmed ? text.trimEnd().length : text.length;
  for (let i = start; i < end; i++) {
    // codePointAt pairs a valid surrogate pair; a lone surrogate comes back as itself.
    const cp = text.codePointAt(i)!;
    const name = unsafeCharName(cp, profile);
    if (name) return { index: i, codePoint: cp, name };
    if (cp > 0xffff) i++;
  }
  return undefined;
}

/** `U+202E`, `U+E0041`: at least four hex digits, upper case. */
export function formatCodePoint(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
}

/**
 * `session key contains U+202E RIGHT-TO-LEFT OVERRIDE at index 12`, or undefined when `text`
 * is clean. `what` names the field as the caller knows it.
 */
export function unsafeCharMessage(what: string, text: string, opts: ScanOptions = {}): string | undefined {
  const hit = findUnsafeChar(text, opts);
  return hit ? `${what} contains ${formatCodePoint(hit.codePoint)} ${hit.name} at index ${hit.index}` : undefined;
}

/**
 * `text` with every refused character written as `\u{…}`, so an error message or a log line can
 * quote bad input without the input rearranging or hiding the message around it.
 */
export function escapeUnsafeChars(text: string, profile: TextProfile = "identifier"): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const cp = text.codePointAt(i)!;
    const wide = cp > 0xffff;
    out += unsafeCharName(cp, profile) ? `\\u{${cp.toString(16).toUpperCase()}}` : String.fromCodePoint(cp);
    if (wide) i++;
  }
  return out;
}

/**
 * Assistant text normalisation (docs/concepts/tools.md, "sessions_history"; OpenClaw `sanitizeTextContent`, profile
 * `history`): what a model wrote for itself or for the tool machinery is taken out so that
 * history readers and reply extraction see only the visible answer.
 *
 * Removed, outside Markdown code (``` / ~~~ fences and `inline code` are never touched, so a
 * reply that *documents* these tags survives):
 * - reasoning blocks `<think>`, `<thinking>`, `<thought>`, `<antthinking>` (also `antml:`-prefixed);
 *   an unterminated one hides the rest of the text;
 * - `<final>` tags (their inner text stays);
 * - `<relevant-memories>` / `<relevant_memories>` blocks;
 * - plain-text tool-call XML (`<tool_call>`, `<tool_result>`, `<function_call>`,
 *   `<function_calls>`, `<tool_calls>`) when a JSON or XML payload follows the opening tag
 *   (a tag in prose followed by words stays); unterminated → to the end of the text;
 * - downgraded `[Tool Call: …]` lines with their `Arguments:` JSON, `[Tool Result for ID …]`
 *   blocks, `[Historical context: …]` markers;
 * - model control tokens `<|…|>` / `<｜…｜>` (a space is put back when the token glued two words);
 * - MiniMax `<invoke …>…</invoke>` and `<minimax:tool_call>` wrappers.
 *
 * Reasoning goes first (a half-written tool call inside a `<think>` block must not swallow the
 * answer after it). Every stage is a single forward scan: closing tags are found with regexes
 * that cannot backtrack across the text, so a megabyte of hostile input stays linear.
 */

export interface NormalizeResult {
  text: string;
  /** True when anything was removed (the text is then also trimmed). */
  changed: boolean;
}

// ---------------------------------------------------------------------------------------------
// Code regions
// ---------------------------------------------------------------------------------------------

export interface CodeRegion {
  start: number;
  end: number;
}

const FENCE_OPEN_RE = / {0,3}(`{3,}|~{3,})/y;
const FENCE_CLOSE_RE = / {0,3}(`{3,}|~{3,})[ \t]*(?:\r?\n|$)/y;

/** Fenced blocks, line by line; an unterminated fence runs to the end of the text (as Markdown renders it). */
function findFencedRegions(text: string): CodeRegion[] {
  const regions: CodeRegion[] = [];
  let open: { start: number; char: string; len: number } | null = null;
  let lineStart = 0;
  while (lineStart <= text.length) {
    const nl = text.indexOf("\n", lineStart);
    const lineEnd = nl === -1 ? text.length : nl;
    if (open === null) {
      FENCE_OPEN_RE.lastIndex = lineStart;
      const m = FENCE_OPEN_RE.exec(text);
      if (m?.[1] && m.index + m[0].length <= lineEnd) {
        open = { start: lineStart, char: m[1][0] ?? "`", len: m[1].length };
      }
    } else {
      FENCE_CLOSE_RE.lastIndex = lineStart;
      const m = FENCE_CLOSE_RE.exec(text);
      if (m?.[1] && m[1][0] === open.char && m[1].length >= open.len) {
        regions.push({ start: open.start, end: lineEnd });
        open = null;
      }
    }
    if (nl === -1) break;
    lineStart = nl + 1;
  }
  if (open !== null) regions.push({ start: open.start, end: text.length });
  return regions;
}

/**
 * Inline code spans: a backtick run is closed only by the next run of the same length
 * (CommonMark); a run nothing closes is literal text. Runs are bucketed by width so pairing
 * stays linear even for text made of thousands of backtick runs.
 */
function findInlineRegions(text: string, fenced: CodeRegion[]): CodeRegion[] {
  const runs: CodeRegion[] = [];
  let f = 0;
  for (const m of text.matchAll(/`+/g)) {
    const start = m.index;
    while (f < fenced.length && (fenced[f]?.end ?? 0) <= start) f += 1;
    const region = fenced[f];
    if (region && start >= region.start && start < region.end) continue;
    runs.push({ start, end: start + m[0].length });
  }
  const byWidth = new Map<number, number[]>();
  runs.forEach((run, i) => {
    const w = run.end - run.start;
    const list = byWidth.get(w);
    if (list) list.push(i);
    else byWidth.set(w, [i]);
  });
  const cursorByWidth = new Map<number, number>();
  const spans: CodeRegion[] = [];
  let i = 0;
  while (i < runs.length) {
    const open = runs[i];
    if (!open) break;
    const w = open.end - open.start;
    const list = byWidth.get(w) ?? [];
    let p = cursorByWidth.get(w) ?? 0;
    while (p < list.length && (list[p] ?? 0) <= i) p += 1;
    cursorByWidth.set(w, p);
    const closeIndex = list[p];
    const close = closeIndex === undefined ? undefined : runs[closeIndex];
    if (closeIndex === undefined || !close) {
      i += 1;
      continue;
    }
    spans.push({ start: open.start, end: close.end });
    i = closeIndex + 1;
  }
  return spans;
}

/** Fenced and inline code regions, sorted and disjoint. */
export function findCodeRegions(text: string): CodeRegion[] {
  if (!text.includes("`") && !text.includes("~~~")) return [];
  const fenced = findFencedRegions(text);
  const inline = findInlineRegions(text, fenced);
  return [...fenced, ...inline].sort((a, b) => a.start - b.start);
}

/** Binary search over sorted, disjoint regions. */
export function isInsideCode(pos: number, regions: CodeRegion[]): boolean {
  let lo = 0;
  let hi = regions.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = regions[mid];
    if (!r) return false;
    if (pos < r.start) hi = mid - 1;
    else if (pos >= r.end) lo = mid + 1;
    else return true;
  }
  return false;
}

function overlapsCode(start: number, end: number, regions: CodeRegion[]): boolean {
  if (isInsideCode(start, regions) || isInsideCode(end - 1, regions)) return true;
  // A region strictly inside [start, end): the first region starting at or after start.
  let lo = 0;
  let hi = regions.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((regions[mid]?.start ?? 0) < start) lo = mid + 1;
    else hi = mid;
  }
  const r = regions[lo];
  return r !== undefined && r.start < end;
}

// ---------------------------------------------------------------------------------------------
// Stages
// ---------------------------------------------------------------------------------------------

/**
 * Removes `open … close` blocks whose tags match `tagRe` (group 1 is `/` on a closing tag).
 * Tags inside code are ignored; a self-closing or stray closing tag is removed on its own;
 * an unterminated block runs to the end of the text.
 */
function stripTagBlocks(text: string, tagRe: RegExp, state: { inBlock: boolean } = { inBlock: false }): string {
  const code = findCodeRegions(text);
  let out = "";
  let cursor = 0;
  let inBlock = state.inBlock;
  tagRe.lastIndex = 0;
  for (const m of text.matchAll(tagRe)) {
    const idx = m.index;
    if (isInsideCode(idx, code)) continue;
    const isClose = m[1] === "/";
    const isSelfClosing = !isClose && /\/\s*>$/.test(m[0]);
    if (!inBlock) {
      out += text.slice(cursor, idx);
      if (!isClose && !isSelfClosing) inBlock = true;
    } else if (isClose) {
      inBlock = false;
    }
    cursor = idx + m[0].length;
  }
  if (!inBlock) out += text.slice(cursor);
  state.inBlock = inBlock;
  return out;
}

const FINAL_TAG_RE = /<\s*\/?\s*(?:antml:)?final\b[^<>]*>/gi;
const THINKING_TAG_RE = /<\s*(\/?)\s*(?:antml:)?(?:think(?:ing)?|thought|antthinking)\b[^<>]*>/gi;
const REASONING_QUICK_RE = /<\s*\/?\s*(?:antml:)?(?:think|thought|antthinking|final)/i;

/**
 * `state.inBlock`: the text starts inside a reasoning block (opened in an earlier text block of
 * the same message); set to whether it ends inside one.
 */
function stripReasoning(text: string, state: { inBlock: boolean }): string {
  if (!REASONING_QUICK_RE.test(text)) return state.inBlock ? "" : text;
  let cleaned = text;
  const code = findCodeRegions(cleaned);
  cleaned = cleaned.replace(FINAL_TAG_RE, (tag, offset: number) => (isInsideCode(offset, code) ? tag : ""));
  return stripTagBlocks(cleaned, THINKING_TAG_RE, state);
}

const MEMORY_TAG_RE = /<\s*(\/?)\s*relevant[-_]memories\b[^<>]*>/gi;

function stripRelevantMemories(text: string): string {
  if (!/<\s*\/?\s*relevant[-_]memories/i.test(text)) return text;
  return stripTagBlocks(text, MEMORY_TAG_RE);
}

const MINIMAX_WRAPPER_RE = /<\/?minimax:tool_call>/gi;
const INVOKE_OPEN_RE = /<invoke\b[^<>]*>/gi;

/**
 * MiniMax leaks tool calls as `<invoke name=…>…</invoke>` inside `<minimax:tool_call>`; only then is `<invoke>`
 * touched.
 */
function stripMinimaxToolCalls(text: string): string {
  if (!/minimax:tool_call/i.test(text)) return text;
  const code = findCodeRegions(text);
  let out = "";
  let cursor = 0;
  INVOKE_OPEN_RE.lastIndex = 0;
  const lower = text.toLowerCase();
  for (let m = INVOKE_OPEN_RE.exec(text); m !== null; m = INVOKE_OPEN_RE.exec(text)) {
    if (isInsideCode(m.index, code)) continue;
    const close = lower.indexOf("</invoke>", m.index + m[0].length);
    if (close === -1) break; // nothing closes this or any later invoke: keep the rest
    out += text.slice(cursor, m.index);
    cursor = close + "</invoke>".length;
    INVOKE_OPEN_RE.lastIndex = cursor;
  }
  const withoutInvokes = out + text.slice(cursor);
  const code2 = findCodeRegions(withoutInvokes);
  return withoutInvokes.replace(MINIMAX_WRAPPER_RE, (tag, offset: number) => (isInsideCode(offset, code2) ? tag : ""));
}

// ASCII `<|…|>` and full-width `<｜…｜>` (U+FF5C); bounded so a stray `<|` cannot scan far.
const MODEL_TOKEN_RE = /<[|｜][^|｜<>\n]{1,128}[|｜]>/g;

function stripModelTokens(text: string): string {
  if (!text.includes("<|") && !text.includes("<｜")) return text;
  const code = findCodeRegions(text);
  return text.replace(MODEL_TOKEN_RE, (token: string, offset: number) => {
    if (overlapsCode(offset, offset + token.length, code)) return token;
    const before = text[offset - 1];
    const after = text[offset + token.length];
    return before && after && !/\s/.test(before) && !/\s/.test(after) ? " " : "";
  });
}

const TOOL_XML_TAG_RE = /<\s*(\/?)\s*(tool_call|tool_result|function_calls?|tool_calls)\b[^<>]*>/gi;
// After the opening tag, a payload is JSON (`{`/`[`) or an XML element, possibly on the next line.
const TOOL_XML_PAYLOAD_RE = /\s*(?:[[{]|<[A-Za-z_])/y;

/**
 * Plain-text tool-call XML. An opening tag followed by a payload starts a hidden block that
 * ends at the matching closing tag (or the end of the text); an opening tag followed by prose
 * stays visible together with its closing tag; a stray closing tag is removed.
 */
function stripToolCallXml(text: string): string {
  if (!/<\s*\/?\s*(?:tool_call|tool_result|function_call|tool_calls)/i.test(text)) return text;
  const code = findCodeRegions(text);
  let out = "";
  let cursor = 0;
  let blockTag: string | null = null;
  const visible = new Map<string, number>();
  TOOL_XML_TAG_RE.lastIndex = 0;
  for (const m of text.matchAll(TOOL_XML_TAG_RE)) {
    const idx = m.index;
    const end = idx + m[0].length;
    const isClose = m[1] === "/";
    const name = (m[2] ?? "").toLowerCase();
    if (blockTag !== null) {
      // Inside a hidden block code regions do not matter: the payload itself may look like code.
      if (isClose && name === blockTag) {
        blockTag = null;
        cursor = end;
      }
      continue;
    }
    if (isInsideCode(idx, code)) continue;
    if (isClose) {
      const balance = visible.get(name) ?? 0;
      out += text.slice(cursor, idx);
      if (balance > 0) {
        out += m[0];
        visible.set(name, balance - 1);
      }
      cursor = end;
      continue;
    }
    out += text.slice(cursor, idx);
    cursor = end;
    if (/\/\s*>$/.test(m[0])) continue; // self-closing: just the tag goes
    TOOL_XML_PAYLOAD_RE.lastIndex = end;
    if (TOOL_XML_PAYLOAD_RE.test(text)) {
      blockTag = name;
    } else {
      out += m[0];
      visible.set(name, (visible.get(name) ?? 0) + 1);
    }
  }
  if (blockTag === null) out += text.slice(cursor);
  return out;
}

/**
 * End of a JSON-ish value starting at `start` (after blanks); the text's end when it never closes; null when none is
 * there.
 */
function consumeJsonish(input: string, start: number): number | null {
  let index = start;
  while (index < input.length && /[ \t\r\n]/.test(input[index] ?? "")) index += 1;
  const first = input[index];
  if (first === "{" || first === "[") {
    let depth = 0;
    let inString = false;
    let escaped = false;
    for (let i = index; i < input.length; i += 1) {
      const ch = input[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (ch === "\\") escaped = true;
        else if (ch === '"') inString = false;
        continue;
      }
      if (ch === '"') inString = true;
      else if (ch === "{" || ch === "[") depth += 1;
      else if (ch === "}" || ch === "]") {
        depth -= 1;
        if (depth === 0) return i + 1;
      }
    }
    return input.length; // never closes: the rest of the text is the (cut-off) payload
  }
  if (first === undefined || first === "\n" || first === "\r") return null;
  // Anything else: the rest of the line.
  const nl = input.indexOf("\n", index);
  return nl === -1 ? input.length : nl;
}

const DOWNGRADED_MARKER_RE = /\[Tool Call:|\[Tool Result for ID|\[Historical context:/gi;
const NEXT_TOOL_MARKER_RE = /\n*\[Tool (?:Call:|Result for ID)/gi;
const ARGUMENTS_RE = /[ \t]*(?:\r?\n)?[ \t]*arguments:?[ \t]?/iy;

/**
 * Text that a provider switch turned tool calls into: `[Tool Call: name (ID: x)]` (+ its
 * `Arguments:` JSON), `[Tool Result for ID x]` + its output up to the next marker or the end,
 * and `[Historical context: …]` notes. Closing brackets are found with indexOf, once.
 */
function stripDowngradedToolText(text: string): string {
  if (!/\[Tool (?:Call|Result)|\[Historical context/i.test(text)) return text;
  const code = findCodeRegions(text);
  let out = "";
  let cursor = 0;
  DOWNGRADED_MARKER_RE.lastIndex = 0;
  for (let m = DOWNGRADED_MARKER_RE.exec(text); m !== null; m = DOWNGRADED_MARKER_RE.exec(text)) {
    const start = m.index;
    if (isInsideCode(start, code)) continue;
    const close = text.indexOf("]", start + m[0].length);
    if (close === -1) break; // no `]` anywhere after: no later marker can be complete either
    const kind = m[0].toLowerCase();
    let end = close + 1;
    if (kind.startsWith("[tool call")) {
      ARGUMENTS_RE.lastIndex = end;
      const args = ARGUMENTS_RE.exec(text);
      if (args) {
        const jsonEnd = consumeJsonish(text, args.index + args[0].length);
        if (jsonEnd !== null) end = jsonEnd;
      }
    } else if (kind.startsWith("[tool result")) {
      NEXT_TOOL_MARKER_RE.lastIndex = end;
      const next = NEXT_TOOL_MARKER_RE.exec(text);
      end = next ? next.index : text.length;
    }
    // One line break after a removed marker goes with it.
    if (text[end] === "\r" && text[end + 1] === "\n") end += 2;
    else if (text[end] === "\n") end += 1;
    out += text.slice(cursor, start);
    cursor = end;
    DOWNGRADED_MARKER_RE.lastIndex = end;
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

// ---------------------------------------------------------------------------------------------

const STAGES: Array<(text: string) => string> = [
  stripMinimaxToolCalls,
  stripModelTokens,
  stripRelevantMemories,
  stripToolCallXml,
  stripDowngradedToolText,
];

export interface NormalizeBlockResult extends NormalizeResult {
  /** The text ends inside an unterminated reasoning block: pass it on to the next text block. */
  insideReasoning: boolean;
}

function normalize(text: string, insideReasoning: boolean): NormalizeBlockResult {
  const state = { inBlock: insideReasoning };
  if (!text) return { text, changed: false, insideReasoning };
  let next = stripReasoning(text, state);
  for (const stage of STAGES) next = stage(next);
  if (next === text) return { text, changed: false, insideReasoning: state.inBlock };
  return { text: next.trim(), changed: true, insideReasoning: state.inBlock };
}

/** Removes hidden reasoning and tool scaffolding from assistant text (see the file comment). */
export function normalizeAssistantText(text: string): NormalizeResult {
  const result = normalize(text, false);
  return { text: result.text, changed: result.changed };
}

/**
 * normalizeAssistantText for one of several text blocks of a message. Providers split one answer into blocks
 * anywhere, even inside `<think>`: `insideReasoning` says the block continues a reasoning block the previous one
 * left open (false for the first), and the result says whether this one leaves it open for the next.
 */
export function normalizeAssistantBlock(text: string, insideReasoning: boolean): NormalizeBlockResult {
  return normalize(text, insideReasoning);
}

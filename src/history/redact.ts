/**
 * Credential redaction for text that leaves a session through a tool (docs/concepts/tools.md, "sessions_history";
 * OpenClaw `logging/redact.ts` default patterns). sessions_history hands one agent another
 * session's transcript, so anything that looks like a secret is masked before it goes out.
 *
 * Rules of the masking (kept from OpenClaw so imported expectations hold):
 * - a token shorter than 18 characters becomes `***`;
 * - a longer one keeps its first 6 and last 4 characters: `sk-1234567890abcdef1234` → `sk-123…1234`;
 * - the key or label in front of a value (`API_KEY=`, `"password":`, `--token `, `Bearer `)
 *   stays, only the value is masked, so a reader still sees *what* was hidden;
 * - a PEM private-key block keeps its BEGIN and END lines around `…redacted…`.
 *
 * All patterns look at the original text and the masked spans are applied in one pass, so a
 * value matched by two patterns (`API_KEY=sk-…` is both an assignment and an `sk-` token) is
 * masked once, never re-masked into `***`.
 *
 * Every pattern is linear on its input: no nested quantifiers, no lazy `[\s\S]*?` runs that
 * could rescan the rest of a megabyte for each candidate start (PEM blocks are found with two
 * forward scans for that reason). Transcript text is untrusted input.
 */

const MASK_MIN_LENGTH = 18;
const MASK_KEEP_START = 6;
const MASK_KEEP_END = 4;

export interface RedactResult {
  text: string;
  /** True when at least one value was masked. */
  redacted: boolean;
}

/** Masks one secret value (see the file comment). Counts code points so an emoji is never split. */
export function maskToken(token: string): string {
  const chars = Array.from(token);
  if (chars.length < MASK_MIN_LENGTH) return "***";
  return `${chars.slice(0, MASK_KEEP_START).join("")}…${chars.slice(-MASK_KEEP_END).join("")}`;
}

/** One region of the input to replace. */
interface Span {
  start: number;
  end: number;
  replacement: string;
}

/**
 * A pattern whose secret sits in one of the named groups `v`, `v2`, `v3` (the first that
 * matched is masked, the rest of the match is kept). The `d` flag gives the group's exact
 * position, even when the same characters also occur in the label.
 * `accept` can veto a match (assignment names are checked in code, see below); after a veto
 * the scan resumes just after `resumeGroup`, so a real match inside the rejected one is found.
 */
interface ValuePattern {
  name: string;
  re: RegExp;
  accept?: (m: RegExpExecArray) => boolean;
  resumeGroup?: string;
  /**
   * The value, matched (sticky, at the end of `re`'s match) only once `accept` took the label. In one regex a
   * rejected label would still scan its bare value, which runs on over the labels after it: `key=a,key=b,…`
   * cost one scan to the end of the text per label (90 s for 1 MB).
   */
  value?: RegExp;
  /**
   * The replacement of the matched value, when it is not maskToken of all of it (an authorization value keeps its
   * scheme); undefined leaves the value as it is. Without it an already masked value is left alone.
   */
  mask?: (value: string) => string | undefined;
}

const VALUE_GROUPS = ["v", "v2", "v3"] as const;

/**
 * Which assignment names hold secrets. Upper-case env style ending in the word (`OPENAI_API_KEY`,
 * `PASSWORD`), a name joining the word with `_`/`-` (`api_key`, `X-Api-Key`, `db-password`),
 * camelCase (`apiKey`, `clientSecret`), or a bare `password`/`passwd` in any case.
 * A bare English `key:`/`token:`/`secret:` (and `monkey:`) is prose and stays untouched.
 */
const SECRET_NAME_RES: RegExp[] = [
  /^[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)$/,
  /[_-](?:key|token|secret|password|passwd)$/i,
  /[a-z0-9](?:Key|Token|Secret|Password|Passwd)$/,
  /^(?:password|passwd)$/i,
];

/**
 * Names that end in a secret word but hold identifiers, not credentials: session keys (every
 * tool result carries one: `sessionKey`, `childSessionKey`, `requesterSessionKey`) and
 * idempotency keys. Masking them would break the transcripts and tool results that need them.
 */
const NOT_SECRET_NAME_RE = /(?:session|idempotency|dedupe?|cache|routing|partition|sort|primary|foreign)[_-]?key$/i;

/** Whether a field or assignment named `name` holds a credential (`apiKey`, `DB_PASSWORD`, `x-api-key`). */
export function isSecretName(name: string): boolean {
  return !NOT_SECRET_NAME_RE.test(name) && SECRET_NAME_RES.some((re) => re.test(name));
}

/** An HTTP authorization header's name as a field (any case): its value is `<scheme> <credentials>`. */
const AUTHORIZATION_NAME_RE = /^(?:proxy-)?authorization$/i;
// The word in front of an authorization value and the blanks after it, when credentials follow.
const AUTHORIZATION_HEAD_RE = /^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*[ \t]+(?=\S)/;

/**
 * One plain lower-case word (`required`, `granted`, `none`, `pending`): what an `authorization` field or JSON key
 * holds when it is a status rather than a header. Credentials have a scheme word in front (`Basic …`), or a digit,
 * a capital or a symbol (`s3cr3t!`, `k1`); a bare word of letters only, shorter than the 20 characters that make
 * any token68 a credential in free text, is left as it is. Only for authorization names: a `password` field
 * holding `letmein` is still masked.
 */
function isPlainWord(value: string): boolean {
  return /^[a-z]{1,19}$/.test(value);
}

/**
 * A word written as an unregistered scheme is (`Custom`, `SSWS`, `Bot`, `Klaviyo-API-Key`): a capital, then letters,
 * words joined by `-`. No digit or symbol: `Hunter2 …` or `s3cr3t! …` starts a secret, not a scheme.
 */
const SCHEME_LIKE_RE = /^[A-Z][A-Za-z]*(?:-[A-Za-z]+)*$/;

/**
 * Credentials after an unregistered scheme: one token (a header's token68 has no blank) that is not a word of
 * letters (`Not required`, `Correct horse battery` are words, not a scheme and its credentials).
 */
function isSingleCredential(value: string): boolean {
  return /^\S+$/.test(value) && !/^[A-Za-z][a-z]*$/.test(value);
}

/**
 * The value of an `authorization` / `proxy-authorization` field or JSON key, masked. Its first word is kept only
 * when it is a scheme: a registered or common one in any case (KNOWN_SCHEME_RE: `Bearer`, `basic`, `Token`,
 * `Digest` …) followed by anything, or a word written as a scheme (SCHEME_LIKE_RE: `Custom`) followed by one
 * token (`Custom k1` → `Custom ***`). Any other value is a secret as a whole: a first word kept would show half
 * of `not required`, of a passphrase or of `user password`. One plain lower-case word (isPlainWord: `granted`) is
 * a status and stays (undefined); so does a value that is already a mask (returned as it is).
 */
function maskAuthorizationValue(value: string): string | undefined {
  if (value.length === 0 || isPlainWord(value)) return undefined;
  if (isMask(value)) return value;
  const head = AUTHORIZATION_HEAD_RE.exec(value)?.[0];
  if (head !== undefined) {
    const scheme = head.trimEnd();
    const credentials = value.slice(head.length);
    if (KNOWN_SCHEME_RE.test(scheme) || (SCHEME_LIKE_RE.test(scheme) && isSingleCredential(credentials))) {
      return isMask(credentials) ? value : head + maskToken(credentials);
    }
  }
  return maskToken(value);
}

/**
 * The value of a field named `name` as it may be stored, when the name alone says it holds a
 * credential (a bare value matches no pattern): `apiKey`, `db_password` masked whole; an
 * `Authorization` / `Proxy-Authorization` header (any case) as maskAuthorizationValue says: a scheme
 * kept (`Basic ***`), or the whole value masked (`not required` → `***`), or a plain-word status kept.
 * Undefined for any other name (`authorizationNote`).
 * An already masked value is returned as it is.
 */
export function maskNamedValue(name: string, value: string): string | undefined {
  if (value.length === 0) return undefined;
  if (AUTHORIZATION_NAME_RE.test(name)) return maskAuthorizationValue(value);
  if (!isSecretName(name)) return undefined;
  return isMask(value) ? value : maskToken(value);
}

/**
 * Query parameter names that hold credentials: every name isSecretName accepts (`api_key`, `access_token`,
 * `password`), plus the bare lower-case ones URLs use (`?token=`, `?key=`, `&sig=`, `X-Amz-Signature`).
 * Every one of them contains a MAYBE_SECRET_RE word or starts with a word it lists after `[?&]`.
 */
const QUERY_SECRET_NAME_RE = /^(?:token|key|secret|apikey|sig|signature|auth|pass|pwd)$|[_.-](?:sig|signature)$/i;

function isQuerySecretName(name: string): boolean {
  return QUERY_SECRET_NAME_RE.test(name) || isSecretName(name);
}

// The characters that end a query value (the next parameter, the fragment, the end of a quoted URL).
const QUERY_VALUE_END = /[&#\s"'<>\\]/;

/**
 * An assignment that is a query parameter the `query` pattern masks (`?api_key=v&page=2`): left to it, so
 * the value stops at `&` instead of running on over the rest of the URL.
 */
function isQueryParameter(m: RegExpExecArray): boolean {
  const before = m.input[m.index - 1];
  if (before !== "?" && before !== "&") return false;
  const after = m.index + (m.groups?.name?.length ?? 0);
  const next = m.input[after + 1];
  return m.input[after] === "=" && next !== undefined && !QUERY_VALUE_END.test(next);
}

/**
 * HTTP authentication schemes (RFC 9110 and the IANA registry, plus common API ones) that mark an
 * `Authorization:` in text as a header rather than prose. TOKEN_SCHEMES carry one token (token68);
 * PARAM_SCHEMES carry `name=value` pairs.
 */
const TOKEN_SCHEMES = "basic|bearer|token|negotiate|ntlm|dpop|gnap|api-?key";
const PARAM_SCHEMES = "digest|hoba|mutual|vapid|privatetoken|oauth|scram-sha-1|scram-sha-256|aws4-hmac-sha256";
// One auth-param: a name, `=`, and a value quoted (`"…"` or JSON-escaped `\"…\"`) or bare (up to `,`, a
// quote, a backslash or whitespace). The three value forms start with different characters.
const AUTH_PARAM = String.raw`[\w-]+=(?:"[^"\n]*"|\\"(?:[^"\\\n]|\\[^"\n])*\\"|[^\s,"'\\]*)`;

/**
 * Schemes whose word is kept in front of an `authorization` field's value, in any case and whatever follows: the
 * header schemes above, and common API ones (Hawk, MAC, JWT, Discord's `Bot`, Okta's `SSWS`, GoDaddy's `sso-key`,
 * fal's `Key`, Azure's `SharedKey`, S3's `AWS`).
 */
const KNOWN_SCHEME_RE = new RegExp(
  `^(?:${TOKEN_SCHEMES}|${PARAM_SCHEMES}|hawk|mac|jwt|bot|ssws|sso-key|key|sharedkey|sharedkeylite|aws)$`,
  "i",
);

/**
 * A scheme word written as schemes are: lower case, capitalised or upper case (`bearer`, `Bearer`, `BEARER`), or its
 * registered spelling (`DPoP`, `ApiKey`, `Api-Key`). `bEaReR` is not a header someone wrote.
 */
function isUsualSchemeForm(word: string): boolean {
  const lower = word.toLowerCase();
  return (
    word === lower ||
    word === word.toUpperCase() ||
    word === lower[0]!.toUpperCase() + lower.slice(1) ||
    word === "DPoP" ||
    word === "ApiKey" ||
    word === "Api-Key" ||
    word === "APIKey"
  );
}

/**
 * Whether a token68 looks like credentials rather than a word: 20 characters or more of anything (all-capital or
 * all-letter tokens exist; English words that long are rare), or 8 or more with a digit, one of `+/=-_.~`, or a
 * capital after a small letter (`dXNlcjpw`; `Auth`, `Authentication` are capitalised words, not mixed case).
 */
function looksLikeToken68(token: string): boolean {
  if (token.length >= 20) return true;
  return token.length >= 8 && /[0-9+/=\-_.~]|[a-z][A-Z]/.test(token);
}

// What may follow credentials that end their header: the end of the line or text, or the quote around it.
const HEADER_VALUE_END = /[\r\n"'`\\]/;

/**
 * An `Authorization: <scheme> <credentials>` match in free text is a header, not prose: the scheme in a usual form
 * (isUsualSchemeForm), and credentials after `Bearer`, or that look like a token (looksLikeToken68), or that are
 * the whole rest of the line or of the quoted value (`-H "Authorization: Token x"`). Prose goes on with another
 * word after them (`Authorization: token expiry is 5 minutes`).
 */
function isHeaderCredential(m: RegExpExecArray): boolean {
  const scheme = m.groups?.scheme ?? "";
  if (!isUsualSchemeForm(scheme)) return false;
  // `Bearer` as a header writes it starts no sentence's next word: what follows it is the token,
  // however short (a leaked short token is worse than a masked word). In lower case it may be
  // prose ("authorization: bearer tokens must be rotated"), judged as other schemes are.
  if (scheme === "Bearer" || scheme === "BEARER") return true;
  const token = m.groups?.v ?? "";
  if (looksLikeToken68(token)) return true;
  const next = m.input[m.index + m[0].length];
  return next === undefined || HEADER_VALUE_END.test(next);
}

// A value: a double- or single-quoted string on one line, or a bare run up to whitespace/quote.
const ASSIGNED_VALUE = String.raw`(?:"(?<v>[^"\n]+)"|'(?<v2>[^'\n]+)'|(?<v3>[^\s"'\\]+))`;

const VALUE_PATTERNS: ValuePattern[] = [
  // Assignments: `OPENAI_API_KEY=sk-…`, `DB_PASSWORD: "hunter2"`, `"API_TOKEN": "…"`, `x-api-key: …`.
  // The look-behind anchors the name at the start of an identifier, so a long identifier is
  // scanned once, not once per character; the regex only wants names *ending* in a secret word
  // (cheap to reject `x = 1`), and isSecretName then judges case and word boundaries.
  {
    name: "assignment",
    re: /(?<![A-Za-z0-9_-])(?<name>[A-Za-z0-9_-]*?(?:key|token|secret|passwd|password))["']?[ \t]*[=:][ \t]*/dgi,
    accept: (m) => isSecretName(m.groups?.name ?? "") && !isQueryParameter(m),
    resumeGroup: "name",
    value: new RegExp(ASSIGNED_VALUE, "dy"),
  },
  // JSON fields: `"apiKey": "…"` (key case-insensitive, escaped quotes inside the value allowed).
  {
    name: "json",
    re: new RegExp(
      '"(?:api[Kk]ey|api_key|token|secret|password|passwd|access[Tt]oken|access_token|' +
        String.raw`refresh[Tt]oken|refresh_token)"\s*:\s*"(?<v>(?:[^"\\\n]|\\.)+)"`,
      "dgi",
    ),
  },
  // CLI flags: `--api-key VALUE`, `--token=VALUE`; `--token-file` is another flag and is kept.
  {
    name: "cli",
    re: new RegExp(
      String.raw`--(?:api[-_]?key|hook[-_]token|token|secret|password|passwd)(?:[ \t]+|=)` +
        String.raw`(?:"(?<v>[^"\n]+)"|'(?<v2>[^'\n]+)'|(?<v3>[^\s"']+))`,
      "dg",
    ),
  },
  // Authorization (and Proxy-Authorization) headers in text, header name in any case: `Authorization: Bearer …`,
  // `Authorization: Basic <base64 of user:password>` (anyone can decode it), also quoted or JSON-escaped
  // (`-H 'Authorization: Basic …'`, `\"Authorization\": \"Bearer …\"`). In free text a header is told from
  // prose by its scheme (TOKEN_SCHEMES) and, in code (isHeaderCredential), by credentials that look like a token
  // or end the line: `Authorization: token expiry is 5 minutes` is prose. The scheme stays, the credentials are
  // masked. `…` is in the value class so a value masked on write (`abcdef…0123`) is read whole and recognised as
  // a mask; stopping at `…` would re-mask its first part into `***…0123` on every read.
  {
    name: "authorization",
    re: new RegExp(
      String.raw`\bauthorization\\?["']?\s*[:=]\s*\\?["']?(?<scheme>${TOKEN_SCHEMES})\s+` +
        String.raw`(?<v>[A-Za-z0-9._\-+=/~…]+)`,
      "dgi",
    ),
    accept: isHeaderCredential,
  },
  // Schemes whose credentials are `name=value` pairs (`Authorization: Digest username="u", response="…"`,
  // AWS SigV4, OAuth 1): the whole list is masked. Each pair starts with a name and each next one with `,`,
  // and a value is quoted (plain or JSON-escaped) or a bare run without `,`: no two ways to read a character.
  {
    name: "authorization-params",
    re: new RegExp(
      String.raw`\bauthorization\\?["']?\s*[:=]\s*\\?["']?(?:${PARAM_SCHEMES})\s+` +
        String.raw`(?<v>${AUTH_PARAM}(?:,[ \t]*${AUTH_PARAM})*)`,
      "dgi",
    ),
  },
  // A JSON or quoted `authorization` / `proxy-authorization` key, any case (`{"Authorization": "Basic …"}`,
  // Python's `{'authorization': 'Token …'}`): its value is the header's, whatever the scheme, and is masked as an
  // authorization field's (maskAuthorizationValue): a scheme stays (`Basic ***`, `Custom ***`), any other value is
  // masked whole (`"not required"` → `"***"`), one plain word (`{"authorization": "required"}`) is a status and
  // stays. `authorizationNote` or `authorization_url` is another key.
  {
    name: "authorization-json",
    re: new RegExp(
      String.raw`"(?:proxy-)?authorization"\s*:\s*"(?<v>(?:[^"\\\n]|\\.)+)"` +
        String.raw`|'(?:proxy-)?authorization'\s*:\s*'(?<v2>[^'\n]+)'`,
      "dgi",
    ),
    mask: maskAuthorizationValue,
  },
  // `curl -u user:pass`, `--user=user:pass` (also wget/httpie style): the password after the first `:`. The
  // user run stops at `=` and whitespace, the separators of the next flag, so runs do not overlap.
  {
    name: "cli-user",
    re: /(?<![\w-])(?:-u|--user)(?:[ \t]+|=)["']?(?<user>[^\s:"'=@]*):(?<v>[^\s"']+)/dg,
    // `docker run -u 1000:1000` is a uid:gid, not a login.
    accept: (m) => !(/^\d+$/.test(m.groups?.user ?? "") && /^\d+$/.test(m.groups?.v ?? "")),
  },
  // Query parameters: `?token=…`, `&api_key=…`, `&sig=…`. Names are judged in code (isQuerySecretName);
  // the value stops at the next parameter, so the other parameters of the URL stay readable.
  {
    name: "query",
    re: /[?&](?<name>[A-Za-z0-9_.-]+)=(?<v>[^&#\s"'<>\\]+)/dg,
    accept: (m) => isQuerySecretName(m.groups?.name ?? ""),
    resumeGroup: "name",
  },
  // A bare bearer token of 18+ characters ("Bearer authentication" is prose and too short).
  { name: "bearer", re: /\b[Bb]earer\s+(?<v>[A-Za-z0-9._\-+=/~]{18,})/dg },
  // Well-known token prefixes.
  { name: "openai", re: /\b(?<v>sk-[A-Za-z0-9_-]{8,})\b/dg },
  { name: "github", re: /\b(?<v>ghp_[A-Za-z0-9]{20,})\b/dg },
  { name: "github-pat", re: /\b(?<v>github_pat_[A-Za-z0-9_]{20,})\b/dg },
  { name: "slack", re: /\b(?<v>xox[baprs]-[A-Za-z0-9-]{10,})\b/dg },
  { name: "slack-app", re: /\b(?<v>xapp-[A-Za-z0-9-]{10,})\b/dg },
  { name: "groq", re: /\b(?<v>gsk_[A-Za-z0-9_-]{10,})\b/dg },
  { name: "google", re: /\b(?<v>AIza[0-9A-Za-z_-]{20,})\b/dg },
  { name: "perplexity", re: /\b(?<v>pplx-[A-Za-z0-9_-]{10,})\b/dg },
  { name: "npm", re: /\b(?<v>npm_[A-Za-z0-9]{10,})\b/dg },
  // Telegram bot tokens: in API URLs as `bot<id>:<secret>` (the `bot` label stays) or bare `<id>:<secret>`.
  { name: "telegram-url", re: /\bbot(?<v>\d+:[A-Za-z0-9_-]{20,})\b/dg },
  { name: "telegram", re: /\b(?<v>\d{6,}:[A-Za-z0-9_-]{20,})\b/dg },
];

function collectValueSpans(text: string, pattern: ValuePattern, spans: Span[]): void {
  const { re } = pattern;
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (pattern.accept && !pattern.accept(m)) {
      const resume = pattern.resumeGroup ? m.indices?.groups?.[pattern.resumeGroup] : undefined;
      re.lastIndex = resume ? resume[1] : m.index + 1;
      continue;
    }
    let groups = m.indices?.groups;
    if (pattern.value) {
      pattern.value.lastIndex = m.index + m[0].length;
      const v = pattern.value.exec(text);
      if (!v) continue; // no value: the search goes on after this label
      groups = v.indices?.groups;
      re.lastIndex = pattern.value.lastIndex; // past the value, as one regex would go on
    }
    let span: [number, number] | undefined;
    for (const g of VALUE_GROUPS) {
      span = groups?.[g];
      if (span) break;
    }
    if (!span) continue;
    const value = text.slice(span[0], span[1]);
    // Already masked (a transcript line is masked when written, and read back through history):
    // masking it again would only lose the part that helps a reader recognise the key.
    const replacement = pattern.mask ? pattern.mask(value) : isMask(value) ? undefined : maskToken(value);
    if (replacement === undefined || replacement === value) continue;
    spans.push({ start: span[0], end: span[1], replacement });
  }
}

// What ends a URL's authority in text: its path, query or fragment, or whitespace. A quote, `<`, `>`, backtick or
// backslash does not: a password may hold one (`mysql://root:it's-s3cret@db`, `pa"ss`, `hunter<2>x`), and ending the
// user info there showed the rest of the password.
const AUTHORITY_END_RE = /[\s/?#]/g;
// After a node's `@host`, where no password can be, the same characters are punctuation around the URL: the quote or
// bracket closing it, the backslash of a JSON-escaped quote (`{"url":"redis://:pw@h","other":"x@y"}`).
const AFTER_HOST_END = "\"'`<>\\";

/** Where the authority starting at `start` ends: its hard end, or a quote or bracket after a node's `@host`. */
function authorityEnd(text: string, start: number): number {
  AUTHORITY_END_RE.lastIndex = start;
  const end = AUTHORITY_END_RE.exec(text)?.index ?? text.length;
  let afterAt = false; // past an `@` of the current node: in its host, not its user info
  for (let i = start; i < end; i++) {
    const c = text[i];
    if (c === "@") afterAt = true;
    else if (c === ",") afterAt = false;
    else if (afterAt && AFTER_HOST_END.includes(c as string)) return i;
  }
  return end;
}

/**
 * Passwords in URLs: `postgres://admin:PASS@db`, `redis://:PASS@cache`, and each node's in a URL that lists several
 * (`redis+cluster://:P1@h1:7000,:P2@h2:7001`); only the passwords are masked, users and hosts stay. A node's user
 * info runs to the last `@` of that node (a raw `@` in a password is masked whole), and a piece without `@` before
 * it belongs to it (`:p,w@h`: a raw `,` in a password), so no part of a password is shown whichever way the list is
 * read. A user alone (`ssh://git@host`) is not masked.
 * Linear: each authority starts after a `://` and stops at `/`, which the next `://` starts with.
 */
function collectUrlPasswordSpans(text: string, spans: Span[]): void {
  for (let i = text.indexOf("://"); i >= 0; i = text.indexOf("://", i + 3)) {
    const start = i + 3;
    const end = authorityEnd(text, start);
    const authority = text.slice(start, end);
    if (!authority.includes("@")) continue;
    let from = 0; // where the user info of the next node with one starts
    let offset = 0; // where the current node starts
    for (const node of authority.split(",")) {
      const at = node.lastIndexOf("@");
      if (at >= 0) {
        const userinfo = authority.slice(from, offset + at);
        const colon = userinfo.indexOf(":");
        const password = colon >= 0 ? userinfo.slice(colon + 1) : "";
        if (password && !isMask(password))
          spans.push({ start: start + from + colon + 1, end: start + offset + at, replacement: maskToken(password) });
        from = offset + node.length + 1;
      }
      offset += node.length + 1;
    }
  }
}

/** A value maskToken produced: `***`, or up to 6 characters, `…`, up to 4 characters. */
export function isMask(value: string): boolean {
  if (value === "***") return true;
  const chars = Array.from(value);
  const at = chars.indexOf("…");
  return at >= 0 && at <= MASK_KEEP_START && chars.length - at - 1 <= MASK_KEEP_END && chars.lastIndexOf("…") === at;
}

const PEM_BEGIN_RE = /-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----/g;
const PEM_END_RE = /-----END [A-Z ]{0,40}PRIVATE KEY-----/g;

/**
 * PEM private-key blocks → BEGIN line, `…redacted…`, END line. Two forward scans instead of a
 * lazy regex: an unterminated BEGIN costs one search, not one per BEGIN.
 */
function collectPemSpans(text: string, spans: Span[]): void {
  if (!text.includes("PRIVATE KEY-----")) return;
  PEM_BEGIN_RE.lastIndex = 0;
  for (let begin = PEM_BEGIN_RE.exec(text); begin !== null; begin = PEM_BEGIN_RE.exec(text)) {
    PEM_END_RE.lastIndex = begin.index + begin[0].length;
    const end = PEM_END_RE.exec(text);
    if (!end) return; // no END after this point: no later BEGIN can be closed either
    spans.push({
      start: begin.index,
      end: end.index + end[0].length,
      replacement: `${begin[0]}\n…redacted…\n${end[0]}`,
    });
    PEM_BEGIN_RE.lastIndex = end.index + end[0].length;
  }
}

/** Applies non-overlapping spans: the earliest wins, then the longest; overlapping later ones are dropped. */
function applySpans(text: string, spans: Span[]): string {
  if (spans.length === 0) return text;
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  let out = "";
  let cursor = 0;
  for (const span of spans) {
    if (span.start < cursor) continue;
    out += text.slice(cursor, span.start) + span.replacement;
    cursor = span.end;
  }
  return out + text.slice(cursor);
}

/**
 * Text none of the patterns can match: every pattern needs one of these (case folded, so a
 * superset): a secret word (the assignment, JSON and CLI names, `PRIVATE KEY`, the query names
 * isSecretName accepts), `bearer` (the Bearer pattern), `authorization` (the three Authorization
 * header patterns, `proxy-authorization` included), a token prefix,
 * a digit before `:` (Telegram), `-u `/`--user` (cli-user), `://` then `@` before any `/?#` or
 * whitespace (url-password: the userinfo between them has none of those), or a bare query name
 * right after `?`/`&` (`sig`, `auth`, `pass`, `pwd`; `key`/`token`/`secret` are already words
 * here) or a `-sig`/`_signature` suffix. Most text has none, and one scan for them replaces the
 * twenty-odd pattern scans (every transcript line is redacted). A plain URL (`https://host/a?page=2`)
 * passes the check, so links in ordinary text keep the fast path. Every alternative is linear: the
 * only run, after `://`, stops at `/`, which the next `://` starts with.
 * A new pattern must be reachable through one of these alternatives, or it never runs.
 */
const MAYBE_SECRET_RE = new RegExp(
  String.raw`key|token|secret|passw|bearer|authorization|sk-|ghp_|github_pat_|xox|xapp-|gsk_|aiza|pplx-|npm_|\d:` +
    String.raw`|-u[ \t=]|--user|:\/\/[^\s/?#@]*@|[?&](?:sig|auth|pass|pwd)|[_.-]sig`,
  "i",
);

/** Masks credentials in `text` (see the file comment). Pure; `redacted` tells whether anything changed. */
export function redactSecrets(text: string): RedactResult {
  if (!text || !MAYBE_SECRET_RE.test(text)) return { text, redacted: false };
  const spans: Span[] = [];
  collectPemSpans(text, spans);
  collectUrlPasswordSpans(text, spans);
  for (const pattern of VALUE_PATTERNS) collectValueSpans(text, pattern, spans);
  const next = applySpans(text, spans);
  return { text: next, redacted: next !== text };
}

/** The names of the built-in patterns, for diagnostics and tests. */
export const REDACTION_PATTERN_NAMES: readonly string[] = ["pem", "url-password", ...VALUE_PATTERNS.map((p) => p.name)];

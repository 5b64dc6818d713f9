import { describe, expect, it } from "vitest";
import { maskToken, redactSecrets, REDACTION_PATTERN_NAMES } from "../../src/history/index.js";
import { redactTranscriptEntries, redactTranscriptMessage, redactValue } from "../../src/history/redact-transcript.js";
import type { TranscriptMessage } from "../../src/history/transcript-types.js";

// Fixture secrets are assembled at run time so the source file itself carries no token-shaped strings.
const rep = (ch: string, n: number): string => ch.repeat(n);
const SK = `sk-${"1234567890abcdef1234"}`; // the documented example, 23 chars
const GHP = `ghp_${rep("a", 16)}WXYZ`;
const GITHUB_PAT = `github_pat_${rep("b", 18)}_9Z`;
const SLACK = `xoxb-${"1234567890"}-${rep("c", 6)}`;
const SLACK_APP = `xapp-1-${rep("D", 12)}`;
const GROQ = `gsk_${rep("e", 20)}`;
const GOOGLE = `AIza${rep("F", 20)}1234`;
const PPLX = `pplx-${rep("g", 20)}`;
const NPM = `npm_${rep("h", 26)}`;
const TELEGRAM = `123456789:AAE${rep("i", 27)}`;
const BASIC = Buffer.from("admin:hunter2hunter2").toString("base64"); // YWRtaW46aHVudGVyMmh1bnRlcjI=

describe("maskToken: short → ***, long → first 6 … last 4", () => {
  it.each([
    ["the documented example", SK, "sk-123…1234"],
    ["17 characters is still short", rep("x", 17), "***"],
    ["18 characters keeps 6 + 4", "abcdefghijklmnopqr", "abcdef…opqr"],
    ["a single character", "a", "***"],
    ["an empty string", "", "***"],
    ["astral characters are not split", `😀😀😀${rep("y", 20)}😀😀`, `😀😀😀yyy…yy😀😀`],
  ])("%s", (_label, token, expected) => {
    expect(maskToken(token)).toBe(expected);
  });
});

describe("redactSecrets: every pattern masks the value and keeps the label", () => {
  it.each([
    // env-style assignments
    ["env KEY with sk value", `OPENAI_API_KEY=${SK}`, "OPENAI_API_KEY=sk-123…1234"],
    ["env TOKEN, short value", "GITHUB_TOKEN=abc123", "GITHUB_TOKEN=***"],
    ["env SECRET with colon", "CLIENT_SECRET: s3cr3tvalue", "CLIENT_SECRET: ***"],
    ["env PASSWORD, double-quoted with spaces", 'DB_PASSWORD="hunter2 with spaces"', 'DB_PASSWORD="hunter…aces"'],
    ["env PASSWD, single-quoted", "MYSQL_PASSWD='p@ss'", "MYSQL_PASSWD='***'"],
    [
      "env with spaces around =",
      "AWS_SECRET_ACCESS_KEY = wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY",
      "AWS_SECRET_ACCESS_KEY = wJalrX…EKEY",
    ],
    ["bare PASSWORD", "PASSWORD=letmein", "PASSWORD=***"],
    ["lower snake case", "db_password: hunter2", "db_password: ***"],
    ["HTTP header style", `x-api-key: ${rep("k", 24)}`, `x-api-key: kkkkkk…kkkk`],
    ["camelCase assignment", "clientSecret=abcdef", "clientSecret=***"],
    ["bare password label, any case", "Password: hunter2", "Password: ***"],
    ["assignment after another assignment", "foo=API_KEY=abc", "foo=API_KEY=***"],
    ["json-quoted env name", `"OPENAI_API_KEY": "${rep("z", 30)}"`, `"OPENAI_API_KEY": "zzzzzz…zzzz"`],
    // JSON fields
    ["json apiKey", `{"apiKey": "${rep("q", 25)}"}`, `{"apiKey": "qqqqqq…qqqq"}`],
    ["json token", '{"token":"short"}', '{"token":"***"}'],
    ["json secret", '{"secret": "shh"}', '{"secret": "***"}'],
    ["json password", '{"password": "hunter2"}', '{"password": "***"}'],
    ["json passwd", '{"passwd": "hunter2"}', '{"passwd": "***"}'],
    ["json accessToken", `{"accessToken": "${rep("a", 18)}"}`, `{"accessToken": "aaaaaa…aaaa"}`],
    ["json refreshToken", '{"refreshToken": "r1"}', '{"refreshToken": "***"}'],
    ["json key in other case", '{"ApiKey": "v"}', '{"ApiKey": "***"}'],
    ["json value with escaped quote", '{"password": "a\\"b"}', '{"password": "***"}'],
    // CLI flags
    ["cli --api-key", "tool --api-key abcdef", "tool --api-key ***"],
    ["cli --hook-token", "tool --hook-token hooksecret", "tool --hook-token ***"],
    ["cli --token=", "tool --token=abc", "tool --token=***"],
    ["cli --secret quoted", 'tool --secret "two words"', 'tool --secret "***"'],
    ["cli --password", `tool --password ${rep("p", 20)}`, "tool --password pppppp…pppp"],
    ["cli --passwd", "tool --passwd pw", "tool --passwd ***"],
    // Authorization / Bearer
    ["Authorization header, short token", "Authorization: Bearer abc.def", "Authorization: Bearer ***"],
    ["Authorization header, long token", `Authorization: Bearer ${rep("T", 30)}`, "Authorization: Bearer TTTTTT…TTTT"],
    ["bare Bearer of 18+ chars", `curl -H "Bearer ${rep("b", 18)}"`, `curl -H "Bearer bbbbbb…bbbb"`],
    [
      "Authorization header as JSON",
      `{"Authorization": "Bearer ${rep("J", 30)}"}`,
      `{"Authorization": "Bearer JJJJJJ…JJJJ"}`,
    ],
    // Basic auth, curl -u, passwords in URLs, query parameters
    ["Authorization: Basic", `Authorization: Basic ${BASIC}`, "Authorization: Basic YWRtaW…cjI="],
    ["Basic in a quoted header", `-H 'Authorization: Basic ${BASIC}'`, "-H 'Authorization: Basic YWRtaW…cjI='"],
    ["Basic, short", "Authorization: Basic YWI6Y2Q=", "Authorization: Basic ***"],
    ["header name and scheme in any case", "AUTHORIZATION: BASIC YWI6Y2Q=", "AUTHORIZATION: BASIC ***"],
    ["lower-case header, Bearer", "authorization: bearer abc", "authorization: bearer ***"],
    // A short token after a capitalised Bearer is masked even when words follow (a property test's counterexample).
    ["short Bearer token, then words", "Authorization: Bearer aaa and more", "Authorization: Bearer *** and more"],
    ["Proxy-Authorization", "Proxy-Authorization: Basic YWI6Y2Q=", "Proxy-Authorization: Basic ***"],
    ["Token scheme", "Authorization: Token 9944b09199c6", "Authorization: Token ***"],
    [
      "Digest: every parameter",
      `Authorization: Digest username="Mufasa", realm="x@y", nonce="dcd98b", response="${rep("6", 32)}"`,
      'Authorization: Digest userna…666"',
    ],
    ["Digest, short", 'Proxy-Authorization: Digest response="b"', "Proxy-Authorization: Digest ***"],
    [
      "AWS SigV4",
      "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, " +
        `SignedHeaders=host;x-amz-date, Signature=${rep("f", 64)}`,
      "Authorization: AWS4-HMAC-SHA256 Creden…ffff",
    ],
    ["JSON-escaped header", '{\\"Authorization\\": \\"Basic YWI6Y2Q=\\"}', '{\\"Authorization\\": \\"Basic ***\\"}'],
    ["JSON key, Basic, short", '{"Authorization": "Basic YWI6Y2Q="}', '{"Authorization": "Basic ***"}'],
    ["JSON key in any case", '{"AUTHORIZATION": "Basic YWI6Y2Q="}', '{"AUTHORIZATION": "Basic ***"}'],
    ["JSON key, any scheme", '{"authorization": "Custom abc123"}', '{"authorization": "Custom ***"}'],
    ["JSON key, no scheme", '{"authorization": "abc123"}', '{"authorization": "***"}'],
    [
      "JSON proxy-authorization",
      '{"Proxy-Authorization": "Negotiate YII="}',
      '{"Proxy-Authorization": "Negotiate ***"}',
    ],
    [
      "JSON key, Digest with escaped quotes",
      `{"Authorization": "Digest username=\\"a\\", response=\\"${rep("9", 32)}\\""}`,
      '{"Authorization": "Digest userna…99\\""}',
    ],
    ["Python dict", "{'authorization': 'Bearer abc'}", "{'authorization': 'Bearer ***'}"],
    // Free text: credentials that look like one are masked wherever the line goes on.
    ["Basic, then more text", "Authorization: Basic dXNlcjpwYXNz sent", "Authorization: Basic *** sent"],
    [
      "Bearer JWT-like, then more text",
      "Authorization: Bearer abc.def.ghi was sent",
      "Authorization: Bearer *** was sent",
    ],
    [
      "a short word that ends the quoted value",
      `-H "Authorization: Bearer abc" https://x`,
      `-H "Authorization: Bearer ***" https://x`,
    ],
    [
      "an all-capital token of 20+",
      `AUTHORIZATION = NEGOTIATE ${rep("Y", 24)} ok`,
      "AUTHORIZATION = NEGOTIATE YYYYYY…YYYY ok",
    ],
    ["registered scheme spelling", "Authorization: DPoP eyJhbGci.x then", "Authorization: DPoP *** then"],
    ["JSON key, a bare short token", '{"authorization": "s3cr3t!"}', '{"authorization": "***"}'],
    ["JSON key, Basic", '{"authorization": "Basic dXNlcjpwYXNz"}', '{"authorization": "Basic ***"}'],
    ["JSON key, capitalised word", '{"authorization": "Granted"}', '{"authorization": "***"}'],
    ["curl -u user:pass", "curl -u admin:hunter2hunter2 https://x", "curl -u admin:*** https://x"],
    ["curl --user=user:pass, quoted", `curl --user="admin:${rep("p", 20)}"`, 'curl --user="admin:pppppp…pppp"'],
    [
      "postgres URL password",
      "db postgres://admin:Sup3rS3cretPassw0rd@db.internal:5432/prod",
      "db postgres://admin:Sup3rS…w0rd@db.internal:5432/prod",
    ],
    ["https URL password", "https://user:p4ssw0rd@example.com/x", "https://user:***@example.com/x"],
    [
      "redis URL, password without user",
      "redis://:verylongredispassword123@cache:6379",
      "redis://:verylo…d123@cache:6379",
    ],
    ["URL password in a JDBC string", "jdbc:mysql://root:toor@db/app", "jdbc:mysql://root:***@db/app"],
    ["?token=", `https://hooks.example.com/in?token=${rep("t", 32)}`, "https://hooks.example.com/in?token=tttttt…tttt"],
    [
      "&api_key= keeps the other parameters",
      `https://x.example/v1?page=2&api_key=${rep("k", 26)}&lang=en#top`,
      "https://x.example/v1?page=2&api_key=kkkkkk…kkkk&lang=en#top",
    ],
    ["?access_token=", "GET /me?access_token=abc123&fields=id", "GET /me?access_token=***&fields=id"],
    ["&password=", "/login?user=bob&password=hunter2", "/login?user=bob&password=***"],
    ["&secret=", "/cb?code=1&secret=shh", "/cb?code=1&secret=***"],
    ["&sig= (SAS)", `/blob?sv=2024&sig=${rep("S", 30)}%3D`, "/blob?sv=2024&sig=SSSSSS…S%3D"],
    [
      "X-Amz-Signature",
      `/k?X-Amz-Expires=300&X-Amz-Signature=${rep("a", 64)}`,
      "/k?X-Amz-Expires=300&X-Amz-Signature=aaaaaa…aaaa",
    ],
    ["?key= (a Google API key)", "https://maps.example/api?key=abc&q=x", "https://maps.example/api?key=***&q=x"],
    ["a quoted URL ends at its quote", `"https://x/?token=${rep("q", 20)}"`, '"https://x/?token=qqqqqq…qqqq"'],
    // token prefixes
    ["sk- prefix", `use ${SK} now`, "use sk-123…1234 now"],
    ["sk- short (8 chars) is still masked", "key sk-abcdefgh here", "key *** here"],
    ["ghp_", `token ${GHP}`, "token ghp_aa…WXYZ"],
    ["github_pat_", `pat ${GITHUB_PAT}`, "pat github…b_9Z"],
    ["xoxb-", `slack ${SLACK}`, "slack xoxb-1…cccc"],
    ["xapp-", `app ${SLACK_APP}`, "app xapp-1…DDDD"],
    ["gsk_", `groq ${GROQ}`, "groq gsk_ee…eeee"],
    ["AIza", `google ${GOOGLE}`, "google AIzaFF…1234"],
    ["pplx-", `pplx ${PPLX}`, "pplx pplx-g…gggg"],
    ["npm_", `npm ${NPM}`, "npm npm_hh…hhhh"],
    ["telegram bare", `bot token ${TELEGRAM}`, "bot token 123456…iiii"],
    [
      "telegram in API URL keeps the bot label",
      `https://api.telegram.org/bot${TELEGRAM}/sendMessage`,
      "https://api.telegram.org/bot123456…iiii/sendMessage",
    ],
  ])("%s", (_label, input, expected) => {
    const result = redactSecrets(input);
    expect(result.text).toBe(expected);
    expect(result.redacted).toBe(true);
  });

  it("masks several secrets in one text, each once", () => {
    const input = `OPENAI_API_KEY=${SK}\nand ${GHP} and {"password": "x"}`;
    expect(redactSecrets(input).text).toBe('OPENAI_API_KEY=sk-123…1234\nand ghp_aa…WXYZ and {"password": "***"}');
  });

  it("a value matched by two patterns is masked once (not re-masked into ***)", () => {
    const out = redactSecrets(`Authorization: Bearer ${rep("L", 40)}`).text;
    expect(out).toBe("Authorization: Bearer LLLLLL…LLLL");
  });

  it("lists its pattern families", () => {
    expect(REDACTION_PATTERN_NAMES).toEqual(
      expect.arrayContaining(["pem", "assignment", "json", "cli", "bearer", "telegram"]),
    );
    expect(REDACTION_PATTERN_NAMES).toEqual(
      expect.arrayContaining(["authorization", "authorization-params", "authorization-json", "url-password", "query"]),
    );
  });

  it("a value already masked on write is recognised on read: unchanged, nothing reported", () => {
    for (const secret of [rep("T", 30), "abc.def"]) {
      for (const input of [
        `Authorization: Bearer ${secret}`,
        `Authorization: Basic ${BASIC}`,
        `Authorization: Digest username="admin", response="${secret}"`,
        `{"authorization": "Custom ${secret}"}`,
        `postgres://admin:${secret}@db/x`,
        `https://x/?token=${secret}&a=1`,
        `curl -u admin:${secret} https://x`,
      ]) {
        const once = redactSecrets(input);
        expect(once.redacted).toBe(true);
        expect(redactSecrets(once.text)).toEqual({ text: once.text, redacted: false });
      }
    }
    expect(redactSecrets("Authorization: Bearer abcdef…0123")).toEqual({
      text: "Authorization: Bearer abcdef…0123",
      redacted: false,
    });
  });
});

describe("redactSecrets: PEM private keys keep BEGIN/END lines", () => {
  const body = `MIIEowIBAAKCAQEA${rep("A", 60)}\n${rep("B", 64)}\n${rep("C", 20)}==`;
  it.each([
    ["RSA", "RSA PRIVATE KEY"],
    ["plain PKCS#8", "PRIVATE KEY"],
    ["EC", "EC PRIVATE KEY"],
    ["OpenSSH", "OPENSSH PRIVATE KEY"],
  ])("%s block", (_label, kind) => {
    const input = `key:\n-----BEGIN ${kind}-----\n${body}\n-----END ${kind}-----\ndone`;
    const result = redactSecrets(input);
    expect(result.text).toBe(`key:\n-----BEGIN ${kind}-----\n…redacted…\n-----END ${kind}-----\ndone`);
    expect(result.text).not.toContain("MIIEow");
    expect(result.redacted).toBe(true);
  });

  it("two blocks are both redacted", () => {
    const block = `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----`;
    const out = redactSecrets(`${block}\nmiddle\n${block}`).text;
    expect(out).toBe(
      "-----BEGIN PRIVATE KEY-----\n…redacted…\n-----END PRIVATE KEY-----\nmiddle\n" +
        "-----BEGIN PRIVATE KEY-----\n…redacted…\n-----END PRIVATE KEY-----",
    );
  });

  it("an unterminated block is left alone (nothing to bound it)", () => {
    const input = "-----BEGIN PRIVATE KEY-----\nMIIE";
    expect(redactSecrets(input)).toEqual({ text: input, redacted: false });
  });

  it("public keys and certificates are not secrets", () => {
    const input =
      `-----BEGIN PUBLIC KEY-----\n${body}\n-----END PUBLIC KEY-----\n` +
      `-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----`;
    expect(redactSecrets(input)).toEqual({ text: input, redacted: false });
  });
});

describe("redactSecrets: no false positives on ordinary text", () => {
  it.each([
    ["prose", "The quick brown fox jumps over the lazy dog."],
    ["the word key with a colon", "The primary key: the id column."],
    ["a word ending in key", "A monkey: bananas, please."],
    ["the word token in prose", "Each token: roughly four characters of English."],
    ["secret as a word", "The secret: practice every day."],
    ["counting tokens", "MAX_TOKENS: 4096 and TOKEN_COUNT=12"],
    ["a bearer in prose", "The Bearer authentication scheme is described in RFC 6750."],
    ["short sk- words", "Ask sk-learn about the task-runner and risk-models."],
    ["a --token-file flag", "run --token-file /etc/token.txt"],
    ["times and ratios", "Meeting at 12:30:45, ratio 16:9, build 20240101."],
    ["a url", "See https://example.com/docs/api-reference?page=2#keys"],
    ["a url with a port and a user", "ssh://git@github.com:22/org/repo.git and git@github.com:org/repo"],
    ["a url with a port and an @ in its path", "http://localhost:8080/users/@me?tab=1&sort=asc"],
    ["a url with ordinary parameters", "https://example.com/search?q=token+limits&keyboard=1&monkey=2#secret"],
    ["an email address after a url", "https://example.com/a:b then mail bob@example.com"],
    ["docker uid:gid", "docker run -u 1000:1000 --rm img and git push -u origin main"],
    ["basic in prose", "Basic authorization is described in RFC 7617."],
    ["authorization in prose", "Authorization is required; ask for authorization: see the authorization docs."],
    ["an authorization status", "authorization: pending review by the admin"],
    ["a key that only starts with authorization", '{"authorizationNote": "Basic rules apply to everyone"}'],
    ["an authorization URL field", '{"authorization_url": "https://auth.example.com/authorize"}'],
    ["an unknown scheme in free text", "Authorization: required for every call"],
    ["a two-word status in free text", "Authorization: not required for internal calls"],
    ["nodes without user info", "redis+cluster://h1:7000,h2:7001,h3:7002/0 and ssh://git@h:22,h2"],
    // Prose that reads like a header: a scheme word, then words (reviewer's cases).
    ["a token scheme word, then prose", "Authorization: token expiry is 5 minutes"],
    ["Basic, then prose", "Authorization: Basic auth is not supported here"],
    ["upper case, =, then prose", "AUTHORIZATION = NEGOTIATE terms with vendor"],
    ["bearer, then prose", "The authorization: bearer tokens must be rotated"],
    ["apikey, then prose", "authorization: apikey rotation policy"],
    ["a capitalised word after the scheme", "Authorization: Basic Authentication is not enabled"],
    ["a scheme word in an odd case", "Authorization: bEaReR abc"],
    ["a JSON status", '{"authorization": "required", "status": "ok"}'],
    ["a quoted status", "{'authorization': 'pending'}"],
    ["code with a keyword", "const apiKeyName = getName();"],
    ["empty string", ""],
    ["unicode prose", "Grüße aus Köln – 東京 😀"],
  ])("%s", (_label, input) => {
    expect(redactSecrets(input)).toEqual({ text: input, redacted: false });
  });
});

describe("redactSecrets: linear time on hostile input", () => {
  const MB = 1024 * 1024;
  const fill = (unit: string): string => unit.repeat(Math.ceil(MB / unit.length));
  it.each([
    ["one long upper-case word", fill("A")],
    ["hyphenated identifier", fill("a-")],
    ["assignments everywhere", fill("x = ")],
    ["unterminated quotes after a KEY", fill('KEY="')],
    ["json keys without values", fill('"token": "')],
    ["BEGIN lines without END", fill("-----BEGIN PRIVATE KEY-----\n")],
    ["telegram-like digits", fill("1234567:")],
    ["bearer without token", fill("Bearer ")],
    ["sk- prefixes", fill("sk-")],
    ["url schemes without userinfo end", fill("a://b:")],
    ["one scheme, then a userinfo that never ends", `x://u:${fill("p:")}`],
    ["one URL listing many nodes with user info", `x://${fill("u:p@h,")}`],
    ["one URL whose user info runs over many commas", `x://u:${fill("p,")}@h`],
    ["one URL whose user info runs over many quotes", `x://u:${fill("p'<")}@h`],
    ["many URLs, each closed by a quote after its host", fill('x://u:p@h",')],
    ["scheme-like words", fill("a+b.c-d")],
    ["query names without =", fill("?tokenX&key")],
    ["query values", fill("&token=v")],
    ["bare values after names that are not secrets", fill("token=v,")],
    ["session keys without spaces", fill("sessionKey:x,")],
    ["curl -u without a colon", fill("-u=x")],
    ["curl -u users", `-u ${fill("u-u ")}`],
    ["authorization headers without value", fill("Authorization: Basic ")],
    ["digest parameters that never end", `Authorization: Digest ${fill("a=b,")}`],
    ["digest headers without parameters", fill("Authorization: Digest a=")],
    ["escaped digest quotes that never close", `Authorization: Digest a=\\"${fill("x\\y")}`],
    ["authorization JSON keys without values", fill('"authorization": "')],
    ["authorization JSON values without a scheme", `"authorization": "${fill("x")}`],
    ["prose after authorization schemes", fill("Authorization: token expiry ")],
    ["plain-word authorization JSON values", fill('{"authorization": "required"}')],
    ["authorization, a scheme, then a word that never ends", `Authorization: Basic ${fill("abc")}`],
    ["realistic mixed text with secrets", fill(`Here is some text with OPENAI_API_KEY=${SK} and more words. `)],
  ])("%s (1 MB) finishes fast", (_label, input) => {
    const started = performance.now();
    const result = redactSecrets(input);
    const elapsed = performance.now() - started;
    expect(typeof result.text).toBe("string");
    expect(elapsed).toBeLessThan(2000);
  });
});

describe("identifiers named like secrets", () => {
  it("leaves session keys and idempotency keys alone, still masks real keys next to them", () => {
    const text = JSON.stringify({
      status: "accepted",
      childSessionKey: "agent:boss:subagent:1c996a79-3398-4c03-a3f8-31c5b7a3c38c",
      sessionKey: "agent:main:telegram:group:123456789012345678",
      idempotencyKey: "retry-4f1c2d3e4b5a69788796a5b4",
      apiKey: "abcdefghijklmnopqrstuvwxyz123456",
    });
    const r = redactSecrets(text);
    expect(r.text).toContain("agent:boss:subagent:1c996a79-3398-4c03-a3f8-31c5b7a3c38c");
    expect(r.text).toContain("agent:main:telegram:group:123456789012345678");
    expect(r.text).toContain("retry-4f1c2d3e4b5a69788796a5b4");
    expect(r.text).not.toContain("abcdefghijklmnopqrstuvwxyz123456");
  });
});

describe("Authorization header fields in tool arguments and results", () => {
  it.each([
    ["Basic, short", { Authorization: "Basic YWI6Y2Q=" }, { Authorization: "Basic ***" }],
    ["Basic, long", { Authorization: `Basic ${BASIC}` }, { Authorization: "Basic YWRtaW…cjI=" }],
    ["Bearer, short, lower-case name", { authorization: "Bearer abc" }, { authorization: "Bearer ***" }],
    ["any case", { AUTHORIZATION: "bearer abc.def" }, { AUTHORIZATION: "bearer ***" }],
    ["Proxy-Authorization", { "Proxy-Authorization": "Basic YWI6Y2Q=" }, { "Proxy-Authorization": "Basic ***" }],
    [
      "Digest",
      { Authorization: `Digest username="Mufasa", response="${rep("6", 32)}"` },
      { Authorization: 'Digest userna…666"' },
    ],
    ["any scheme", { authorization: "Custom k1" }, { authorization: "Custom ***" }],
    ["no scheme", { authorization: "k1" }, { authorization: "***" }],
  ])("%s", (_label, headers, expected) => {
    const args = { url: "https://api.example.com/v1", headers };
    const out = redactValue(args);
    expect(out).toEqual({ url: args.url, headers: expected });
    // Read back (sessions_history) or written again (an import re-run): unchanged.
    expect(redactValue(out)).toBe(out);
  });

  it("a tool call's arguments in a transcript line are masked; ordinary fields stay", () => {
    const message: TranscriptMessage = {
      role: "assistant",
      content: [
        {
          type: "toolCall",
          id: "call_1",
          name: "http_request",
          arguments: {
            headers: { Authorization: "Basic YWI6Y2Q=", Accept: "application/json" },
            authorizationNote: "Basic rules: ask the admin for authorization first",
            body: "the authorization step comes later",
          },
        },
      ],
      timestamp: 1,
    };
    const out = redactTranscriptMessage(message);
    expect((out.content as any)[0].arguments).toEqual({
      headers: { Authorization: "Basic ***", Accept: "application/json" },
      authorizationNote: "Basic rules: ask the admin for authorization first",
      body: "the authorization step comes later",
    });
  });

  it.each([
    ["Basic", { authorization: "Basic dXNlcjpwYXNz" }, { authorization: "Basic ***" }],
    ["Bearer JWT-like", { authorization: "Bearer abc.def.ghi" }, { authorization: "Bearer ***" }],
    ["a bare short token", { authorization: "s3cr3t!" }, { authorization: "***" }],
    ["a capitalised word", { Authorization: "Granted" }, { Authorization: "***" }],
    ["a long lower-case token", { authorization: rep("q", 20) }, { authorization: "qqqqqq…qqqq" }],
  ])("still masked: %s", (_label, headers, expected) => {
    expect(redactValue({ headers })).toEqual({ headers: expected });
  });

  it("a status in one plain lower-case word is not a credential; other credential names still mask it", () => {
    const value = {
      authorization: "required",
      "Proxy-Authorization": "none",
      nested: { AUTHORIZATION: "pending" },
      password: "letmein",
    };
    expect(redactValue(value)).toEqual({ ...value, password: "***" });
    const message: TranscriptMessage = {
      role: "toolResult",
      toolCallId: "call_1",
      toolName: "http",
      content: [{ type: "text", text: '{"authorization": "granted"}' }],
      details: { authorization: "granted", Authorization: "Bearer abc" },
      isError: false,
      timestamp: 1,
    };
    const out = redactTranscriptMessage(message);
    expect(out.content).toBe(message.content);
    expect(out.details).toEqual({ authorization: "granted", Authorization: "Bearer ***" });
  });

  it("fields that only look like it are not masked", () => {
    const value = {
      authorizationNote: "Basic rules apply",
      authorized: "yes",
      "x-authorization-mode": "strict",
      notes: { authorization: undefined, authorizationStatus: "granted" },
      authorization: "",
    };
    expect(redactValue(value)).toBe(value);
  });
});

describe("redactTranscriptMessage: every word field of a message, not only content", () => {
  it("masks Pi's bashExecution command/output, compaction and branch summaries, keeps structure", () => {
    const bash: TranscriptMessage = {
      role: "bashExecution",
      content: "",
      command: `export OPENAI_API_KEY=${SK} && cat .env`,
      output: `GITHUB_TOKEN=${GHP}\nok`,
      exitCode: 0,
      cancelled: false,
      truncated: false,
      fullOutputPath: "/tmp/out-1.log",
      timestamp: 2,
    };
    const out = redactTranscriptMessage(bash);
    expect(out).not.toBe(bash);
    expect(out.command).toBe("export OPENAI_API_KEY=sk-123…1234 && cat .env");
    expect(out.output).toBe("GITHUB_TOKEN=ghp_aa…WXYZ\nok");
    expect({ ...out, command: bash.command, output: bash.output }).toEqual(bash);
    for (const role of ["compactionSummary", "branchSummary"]) {
      const summary = { role, content: "", summary: `the user pasted ${SK}`, fromId: "ab12cd34", timestamp: 3 };
      expect(redactTranscriptMessage(summary)).toEqual({ ...summary, summary: "the user pasted sk-123…1234" });
    }
  });

  it("masks a toolResult's details at any depth, by pattern and by field name", () => {
    const message: TranscriptMessage = {
      role: "toolResult",
      toolCallId: "call_1",
      toolName: "exec",
      content: [{ type: "text", text: "done" }],
      details: { stdout: `token ${SK}`, env: { apiKey: "plain-value-without-pattern" }, exitCode: 0 },
      isError: false,
      timestamp: 4,
    };
    const out = redactTranscriptMessage(message);
    expect(out.details).toEqual({ stdout: "token sk-123…1234", env: { apiKey: "plain-…tern" }, exitCode: 0 });
    expect(out.content).toBe(message.content); // unchanged parts are shared, not copied
  });

  it("never touches structural fields, even when they look like secrets; an unchanged line is returned as is", () => {
    const message: TranscriptMessage = {
      role: "assistant",
      content: [{ type: "text", text: "hello" }],
      model: SK,
      provider: SK,
      toolCallId: SK,
      idempotencyKey: `mirror:${SK}`,
      stopReason: "stop",
      timestamp: 5,
    };
    expect(redactTranscriptMessage(message)).toBe(message);
    const entries = [{ type: "message", id: "e1", timestamp: "2026-01-01T00:00:00.000Z", message }];
    expect(redactTranscriptEntries(entries, true)[0]).toBe(entries[0]);
  });

  it("redactTranscriptEntries leaves everything as it is when disabled", () => {
    const message: TranscriptMessage = { role: "bashExecution", content: "", command: `echo ${SK}` };
    const entries = [{ type: "message", id: "e1", timestamp: "2026-01-01T00:00:00.000Z", message }];
    expect(redactTranscriptEntries(entries, false)).toBe(entries);
    expect(redactTranscriptEntries(entries, true)[0]!.message!.command).toBe("echo sk-123…1234");
  });
});

describe("redactTranscriptEntries: lines that are not messages", () => {
  const at = "2026-01-01T00:00:00.000Z";
  it("masks Pi's compaction/branch_summary summaries, custom_message content, custom data and details", () => {
    const entries = [
      {
        type: "compaction",
        id: "c1",
        parentId: "m0",
        timestamp: at,
        summary: `User shared OPENAI_API_KEY=${SK} and db password: hunter2hunter2`,
        firstKeptEntryId: "m0",
        tokensBefore: 1234,
        details: { readFiles: ["/srv/.env"], note: `GITHUB_TOKEN=${GHP}` },
        fromHook: false,
      },
      { type: "branch_summary", id: "b1", parentId: "c1", timestamp: at, fromId: "m0", summary: `pasted ${GHP}` },
      {
        type: "custom_message",
        id: "cm1",
        parentId: "b1",
        timestamp: at,
        customType: "reminder",
        content: [{ type: "text", text: `Authorization: Bearer ${rep("Q", 30)}` }],
        display: true,
      },
      { type: "custom_message", id: "cm2", parentId: "cm1", timestamp: at, customType: "x", content: `use ${SK}` },
      {
        type: "custom",
        id: "cu1",
        parentId: "cm2",
        timestamp: at,
        customType: "ext.state",
        data: { apiKey: "plainvaluewithoutpattern", nested: [{ text: `key ${SK}` }] },
      },
      { type: "label", id: "l1", parentId: "cu1", timestamp: at, targetId: "m0", label: `the ${SK} turn` },
    ];
    const out = redactTranscriptEntries(entries, true);
    expect(JSON.stringify(out)).not.toMatch(/1234567890abcdef1234|hunter2hunter2|aaaaWXYZ|QQQQQQQQQQ|plainvalue/);
    expect(out[0]).toEqual({
      ...entries[0],
      summary: "User shared OPENAI_API_KEY=sk-123…1234 and db password: ***",
      details: { readFiles: ["/srv/.env"], note: "GITHUB_TOKEN=ghp_aa…WXYZ" },
    });
    expect(out[1]).toEqual({ ...entries[1], summary: "pasted ghp_aa…WXYZ" });
    expect(out[2]).toEqual({
      ...entries[2],
      content: [{ type: "text", text: "Authorization: Bearer QQQQQQ…QQQQ" }],
    });
    expect(out[3]).toEqual({ ...entries[3], content: "use sk-123…1234" });
    expect(out[4]).toEqual({
      ...entries[4],
      data: { apiKey: "plainv…tern", nested: [{ text: "key sk-123…1234" }] },
    });
    expect(out[5]).toEqual({ ...entries[5], label: "the sk-123…1234 turn" });
    // Idempotent: a line read back and written again (an import re-run) is not changed again.
    const again = redactTranscriptEntries(out, true);
    for (const [i, e] of again.entries()) expect(e).toBe(out[i]);
  });

  it("never touches structural fields of an entry; an unchanged entry is returned as is", () => {
    const entries = [
      { type: "model_change", id: SK, parentId: SK, timestamp: at, provider: SK, modelId: SK, runId: SK },
      { type: "thinking_level_change", id: "t1", timestamp: at, thinkingLevel: "high" },
      { type: "custom", id: "y1", timestamp: at, customType: "openclaw.sessions_yield", data: { message: "waiting" } },
    ];
    const out = redactTranscriptEntries(entries, true);
    for (const [i, e] of out.entries()) expect(e).toBe(entries[i]);
  });

  it("the live writer's sessions_yield line: its message and note are masked", () => {
    const message = `waiting; the deploy key is DEPLOY_TOKEN=${GHP}`;
    const entry = {
      type: "custom",
      id: "run1:y",
      runId: "run1",
      timestamp: at,
      customType: "openclaw.sessions_yield",
      data: { message, note: `${message}\n\n[Context: …]` },
    };
    const [out] = redactTranscriptEntries([entry], true);
    expect(out!.data).toEqual({
      message: "waiting; the deploy key is DEPLOY_TOKEN=ghp_aa…WXYZ",
      note: "waiting; the deploy key is DEPLOY_TOKEN=ghp_aa…WXYZ\n\n[Context: …]",
    });
    expect(redactTranscriptEntries([entry], false)[0]).toBe(entry);
  });
});

describe("an authorization key's value: a scheme stays, anything else is masked whole", () => {
  it.each([
    // A first word that is no scheme is part of the secret (it was kept: `"not ***"`, `"hunter2 ***"`).
    ["two plain words", '{"authorization": "not required"}', '{"authorization": "***"}'],
    ["a capitalised word, then a word", '{"Authorization": "Not required"}', '{"Authorization": "***"}'],
    ["a password, then a word", '{"authorization": "hunter2 extra"}', '{"authorization": "***"}'],
    ["a symbol in the first word", '{"authorization": "s3cr3t! more"}', '{"authorization": "***"}'],
    ["user and password, quoted", "{'authorization': 'admin hunter22'}", "{'authorization': '***'}"],
    ["a passphrase", '{"authorization": "Correct horse battery staple"}', '{"authorization": "Correc…aple"}'],
    ["an unknown lower-case word, then a token", '{"authorization": "custom k1"}', '{"authorization": "***"}'],
    // Schemes: registered or common ones in any case whatever follows, a word written as a scheme before one token.
    ["Token", '{"authorization": "Token 9944b09199c6"}', '{"authorization": "Token ***"}'],
    [
      "a registered scheme in lower case, then words",
      '{"authorization": "bearer abc def"}',
      '{"authorization": "bearer ***"}',
    ],
    ["an API scheme (Okta)", '{"authorization": "SSWS 00abcDEF"}', '{"authorization": "SSWS ***"}'],
    ["an unregistered scheme, one token", '{"authorization": "Custom abc123"}', '{"authorization": "Custom ***"}'],
  ])("%s", (_label, input, expected) => {
    const once = redactSecrets(input);
    expect(once.text).toBe(expected);
    // Read back (sessions_history): unchanged, nothing reported.
    expect(redactSecrets(once.text)).toEqual({ text: once.text, redacted: false });
  });

  it.each([
    ["two plain words", { authorization: "not required" }, { authorization: "***" }],
    ["a password, then a word", { Authorization: "hunter2 extra" }, { Authorization: "***" }],
    ["a symbol in the first word", { "Proxy-Authorization": "s3cr3t! more" }, { "Proxy-Authorization": "***" }],
    ["Discord's Bot", { authorization: "Bot abc.def" }, { authorization: "Bot ***" }],
    ["an unregistered scheme, then words", { authorization: "Custom one two" }, { authorization: "***" }],
  ])("as a field: %s", (_label, headers, expected) => {
    const out = redactValue({ headers });
    expect(out).toEqual({ headers: expected });
    expect(redactValue(out)).toBe(out);
  });

  it("prose about authorization is not a key/value and stays", () => {
    for (const text of [
      "Authorization: not required",
      "the authorization was not required",
      "Authorization not required for hunter2 extra",
    ])
      expect(redactSecrets(text)).toEqual({ text, redacted: false });
  });
});

describe("URL passwords, node by node", () => {
  it.each([
    [
      "a cluster URL with a password per node",
      "redis+cluster://:p1secret@h1:7000,:p2secret@h2:7001/0",
      "redis+cluster://:***@h1:7000,:***@h2:7001/0",
    ],
    [
      "user and password per node",
      "rediss+cluster://app:first-pass@h1:7000,app:second-pass@h2:7001",
      "rediss+cluster://app:***@h1:7000,app:***@h2:7001",
    ],
    ["a raw @ in the password", "redis://:p@ss@host:1", "redis://:***@host:1"],
    [
      "several URLs in one list",
      "redis://:p1secret@h1:7000,redis://:p2secret@h2:7001",
      "redis://:***@h1:7000,redis://:***@h2:7001",
    ],
    [
      "in a JSON string, other values stay",
      '{"url":"redis://:pw@h","other":"x@y"}',
      '{"url":"redis://:***@h","other":"x@y"}',
    ],
    // A quote, bracket, backtick or backslash in a password is part of it, as whitespace, `/`, `?` and `#` are not;
    // after the `@host` it is the punctuation around the URL.
    [
      "an apostrophe in the password",
      "connect with mysql://root:it's-s3cret@db.internal:3306/app",
      "connect with mysql://root:***@db.internal:3306/app",
    ],
    [
      "a double quote in the password",
      'DATABASE_URL=postgres://admin:pa"ss123@db:5432/x',
      "DATABASE_URL=postgres://admin:***@db:5432/x",
    ],
    ["angle brackets in the password", "use redis://:hunter<2>secret@cache:6379", "use redis://:***@cache:6379"],
    ["a backtick in the password", "amqp://guest:pa`ss@rabbit/", "amqp://guest:***@rabbit/"],
    ["a backslash in the password", String.raw`amqp://guest:pa\ss@rabbit/`, "amqp://guest:***@rabbit/"],
    ["a quote in a later node's password", 'redis+cluster://:p1@h1,:p"2@h2', "redis+cluster://:***@h1,:***@h2"],
    [
      "quoted and bracketed URLs end at the quote or bracket",
      "'redis://:pw1@h1' \"redis://:pw2@h2\" <redis://:pw3@h3>,`redis://:pw4@h4`,x@y",
      "'redis://:***@h1' \"redis://:***@h2\" <redis://:***@h3>,`redis://:***@h4`,x@y",
    ],
    [
      "in a JSON-escaped string, other values stay",
      String.raw`{\"url\":\"redis://:pw@h\",\"other\":\"x@y\"}`,
      String.raw`{\"url\":\"redis://:***@h\",\"other\":\"x@y\"}`,
    ],
  ])("%s", (_label, input, expected) => {
    expect(redactSecrets(input).text).toBe(expected);
  });

  it("no piece of any node's password is shown, however the list is read", () => {
    for (const [text, secrets, last] of [
      // A raw `,` in a later node's password.
      ["redis+cluster://:pw1@h1:1,:p2a,p2b@h2:2", ["pw1", "p2a", "p2b"], "@h2:2"],
      // A node without user info between two with.
      ["redis+cluster://u:pw1@h1:7000,h2:7001,u:pw3@h3", ["pw1", "pw3"], "@h3"],
      // User info on a later node only.
      ["redis+cluster://h1:7000,:pw2@h2", ["pw2"], "@h2"],
    ] as const) {
      const out = redactSecrets(text).text;
      for (const secret of secrets) expect(out).not.toContain(secret);
      expect(out.endsWith(last)).toBe(true);
    }
  });
});

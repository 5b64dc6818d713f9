import { describe, expect, it } from "vitest";
import { maskToken, redactSecrets, REDACTION_PATTERN_NAMES } from "../../src/history/index.js";
import { redactTranscriptEntries, redactTranscriptMessage } from "../../src/history/redact-transcript.js";
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

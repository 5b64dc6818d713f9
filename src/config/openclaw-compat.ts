/**
 * Config keys that exist so an OpenClaw config starts unchanged (docs/concepts/coming-from-openclaw.md):
 * `session.store` and `session.maintenance`, with OpenClaw's value forms — durations like
 * `"30d"`, sizes like `"10mb"`. Parsed here into numbers so the rest of the code never sees
 * the strings.
 */
import { z } from "zod";
import { valueKind } from "./config-issues.js";

const DURATION_UNITS_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};
const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `"30d"`, `"12h"`, `"90m"`, `"1.5h"` → milliseconds; undefined when not a duration. */
export function parseDurationMs(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$/i.exec(text);
  if (!m) return undefined;
  return Math.round(Number(m[1]) * DURATION_UNITS_MS[m[2]!.toLowerCase()]!);
}

/** `"10mb"`, `"512kb"`, `1048576` → bytes; undefined when not a size. */
export function parseSizeBytes(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(text);
  if (!m) return undefined;
  return Math.round(Number(m[1]) * SIZE_UNITS[(m[2] ?? "b").toLowerCase()]!);
}

const DURATION_EXAMPLES = '"30d", "12h", "90m"';

/** The duration in `s` as milliseconds; an issue saying what is accepted (`accepted`) when it is none. */
function durationMs(s: string, ctx: z.RefinementCtx, accepted = `a duration such as ${DURATION_EXAMPLES}`): number {
  const ms = parseDurationMs(s);
  if (ms === undefined || ms <= 0) {
    ctx.addIssue({ code: "custom", message: `not a duration: "${s}" (use ${accepted})` });
    return z.NEVER;
  }
  return ms;
}

const duration = z.string().transform((s, ctx) => durationMs(s, ctx));

const RETENTION_ACCEPTED = `a duration such as ${DURATION_EXAMPLES}, or false to keep them forever`;
// One union of the accepted kinds with its own message: zod's message for a failed union is only
// "Invalid input" (`true` is neither a string nor `false`, and nothing said which are accepted).
const retention = z
  .union([z.string(), z.literal(false)], {
    error: (iss) => `expected ${RETENTION_ACCEPTED} (got ${valueKind(iss.input)})`,
  })
  .transform((v, ctx) => (v === false ? v : durationMs(v, ctx, RETENTION_ACCEPTED)));

const size = z.union([z.number().int().min(0), z.string()]).transform((v, ctx) => {
  const bytes = typeof v === "number" ? v : parseSizeBytes(v);
  if (bytes === undefined) {
    ctx.addIssue({ code: "custom", message: `not a size: "${String(v)}" (use e.g. "10mb", "512kb")` });
    return z.NEVER;
  }
  return bytes;
});

/**
 * `session.maintenance`: prune sessions idle longer than `pruneAfter`, keep at most `maxEntries`
 * (oldest go first), archive their transcripts, and delete transcript archives past their
 * retention (src/workers/session-prune.ts). `mode: "warn"` (OpenClaw's default) only reports
 * what would be removed — the dry run; `"enforce"` removes.
 */
export const SessionMaintenanceSchema = z
  .strictObject({
    mode: z.enum(["warn", "enforce"]).default("warn"),
    pruneAfter: duration.optional(),
    /** Legacy spelling of pruneAfter, in days. */
    pruneDays: z.number().int().min(1).optional(),
    maxEntries: z.number().int().min(1).default(500),
    // How long `.reset.<ts>` archives are kept (ms); `false`: forever; unset: pruneAfter, as in OpenClaw.
    resetArchiveRetention: retention.optional(),
    // Accepted for OpenClaw configs; Switchboard's transcripts and Redis store have no use for them.
    rotateBytes: size.optional(),
    maxDiskBytes: size.optional(),
    highWaterBytes: size.optional(),
  })
  .transform(({ pruneDays, pruneAfter, ...rest }) => ({
    ...rest,
    pruneAfterMs:
      pruneAfter ?? (pruneDays !== undefined ? pruneDays * DURATION_UNITS_MS.d! : 30 * DURATION_UNITS_MS.d!),
  }));

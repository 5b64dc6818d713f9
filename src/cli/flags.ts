/** Numeric command-line flags, refused with the flag's name and value before anything is asked. */
import { ValidationError } from "../errors/index.js";
import { GatewayTokenSchema } from "../config/schema.js";

/**
 * A command line the CLI refuses before asking anything (a bad flag value, flags that exclude each
 * other, a missing argument): code `invalid_request` as any refused request, exit code 64 (usage).
 */
export class UsageError extends ValidationError {}

/** `value` as a whole number ≥ 1 (and ≤ `max`, when given), or undefined when the flag is absent. */
export function positiveInt(name: string, value: string | undefined, max?: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`${name} must be a whole number ≥ 1 (got ${JSON.stringify(value)})`);
  if (max !== undefined && n > max)
    throw new UsageError(`${name} must be a whole number from 1 to ${max} (got ${JSON.stringify(value)})`);
  return n;
}

/** Why `token` cannot be a gateway token (gateway.auth.token's rules), or undefined when it can. */
export function tokenProblem(token: string): string | undefined {
  const check = GatewayTokenSchema.safeParse(token);
  return check.success ? undefined : check.error.issues.map((i) => i.message).join("; ");
}

/**
 * A `--token` given on the command line that no gateway could ask for is a bad flag value (usage),
 * named without its value; `sets`: the setting it stands for, when it stands for one.
 */
export function checkTokenFlag(token: string | undefined, sets?: string): void {
  const why = token === undefined ? undefined : tokenProblem(token);
  if (why) throw new UsageError(`--token: ${why}${sets ? ` (got (hidden); it sets ${sets})` : ""}`);
}

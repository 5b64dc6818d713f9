/** Numeric command-line flags, refused with the flag's name and value before anything is asked. */
import { ValidationError } from "../errors/index.js";

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

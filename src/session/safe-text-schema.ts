/**
 * zod building blocks that refuse unsafe characters (see unsafe-chars.ts), for the schemas that
 * are the entry point of keys, ids and labels. The check runs on the value as sent, before any
 * `.trim()`, so the index in the message is the one the caller can find in their own input.
 */
import { z } from "zod";
import { unsafeCharMessage, type TextProfile } from "./unsafe-chars.js";

/** A superRefine callback: one issue naming the first unsafe character of the value. */
export function refuseUnsafeChars(what: string, profile: TextProfile = "identifier") {
  return (value: string, ctx: z.RefinementCtx): void => {
    const message = unsafeCharMessage(what, value, { profile, trimmed: true });
    if (message) ctx.addIssue({ code: "custom", message });
  };
}

/** A string that holds no unsafe character (outer whitespace aside) and is then trimmed. */
export function safeString(what: string, profile: TextProfile = "identifier") {
  return z.string().superRefine(refuseUnsafeChars(what, profile)).trim();
}

/**
 * An id a channel may send as a JSON number (Telegram chat and thread ids): only a whole number
 * JSON carries exactly. Past ±(2^53 − 1) `JSON.parse` has already rounded it, so two ids would
 * become one value (two groups sharing a session, a message taken for another's duplicate), and
 * a fraction or an exponent would become key text such as `1e+21`: refused, with the advice to
 * send the id as a string.
 */
export function wholeNumberId(what: string) {
  return z
    .number()
    .refine(
      Number.isSafeInteger,
      `${what} as a number must be a whole number within ±${Number.MAX_SAFE_INTEGER}; send larger ids as strings`,
    );
}

import type { DeadLetter } from "../../runs/dead-letters.js";
import { ValidationError } from "../../errors/index.js";
import { connect, type GlobalOptions } from "../client.js";
import { printJson, terminalSafe } from "../output.js";
import { positiveInt } from "../flags.js";

/**
 * `switchboard deadletters [list [--limit n] [--cursor c]|replay <runId>|replay --all|discard <runId>]`: messages
 * whose turn was given up (storage unavailable past its deadline, or unrunnable data), never dropped.
 */
export async function deadLettersCommand(
  action: string | undefined,
  runId: string | undefined,
  opts: GlobalOptions & { json?: boolean; all?: boolean; limit?: string; cursor?: string },
): Promise<number> {
  const client = await connect(opts, "direct");
  try {
    switch (action ?? "list") {
      case "list": {
        const limit = positiveInt("--limit", opts.limit, 1000);
        const res = (await client.rpc("deadletters.list", {
          ...(limit ? { limit } : {}),
          ...(opts.cursor ? { cursor: opts.cursor } : {}),
        })) as { count: number; deadLetters: DeadLetter[]; nextCursor?: string };
        if (opts.json) {
          printJson(res);
          return 0;
        }
        if (res.count === 0) process.stdout.write("No dead letters.\n");
        for (const l of res.deadLetters) {
          const when = new Date(l.failedAt).toISOString().replace("T", " ").slice(0, 19);
          const text = (l.turn?.text ?? l.raw ?? "").replace(/\s+/g, " ").slice(0, 60);
          process.stdout.write(
            `${terminalSafe(`${l.runId}  ${when}  ${l.kind.padEnd(9)} ${l.sessionKey}  "${text}"\n    ${l.reason}`)}\n`,
          );
        }
        if (res.nextCursor) {
          const more = `${res.deadLetters.length} of ${res.count} shown; next page: --cursor ${res.nextCursor}`;
          process.stdout.write(`${terminalSafe(more)}\n`);
        }
        return 0;
      }
      case "replay": {
        if (!runId && !opts.all) throw new ValidationError("replay needs a runId or --all");
        const res = (await client.rpc("deadletters.replay", runId ? { runId } : { all: true })) as {
          count: number;
          replayed: { runId: string; replayedAs: string; sessionKey: string }[];
        };
        if (opts.json) {
          printJson(res);
          return 0;
        }
        for (const r of res.replayed)
          process.stdout.write(`replayed ${r.runId} as run ${r.replayedAs} on ${r.sessionKey}\n`);
        process.stdout.write(`${res.count} replayed\n`);
        return 0;
      }
      case "discard": {
        if (!runId) throw new ValidationError("discard needs a runId");
        const res = await client.rpc("deadletters.discard", { runId });
        if (opts.json) {
          printJson(res);
          return 0;
        }
        process.stdout.write(`discarded ${runId}\n`);
        return 0;
      }
      default:
        throw new ValidationError(`unknown action ${action} (list, replay, discard)`);
    }
  } finally {
    await client.close();
  }
}

import type { DeadLetter } from "../../runs/dead-letters.js";
import { type Client, connect, type GlobalOptions } from "../client.js";
import { EXIT, printJson, terminalSafe } from "../output.js";
import { positiveInt, UsageError } from "../flags.js";

/**
 * A letter `replay --all` left: its turn cannot be read, or its session cannot be had again (a
 * sub-agent's, deleted), so only `discard` removes it.
 */
interface NotReplayable {
  runId: string;
  kind?: DeadLetter["kind"];
  sessionKey: string;
  reason: string;
}

/**
 * The letters still there after `replay --all` that hold no readable turn (replay skips them):
 * said by name, not left for the operator to find. Letters with a turn still there were given up
 * while the replay ran; the next replay takes them.
 */
async function notReplayable(client: Client): Promise<NotReplayable[]> {
  const out: NotReplayable[] = [];
  let cursor: string | undefined;
  do {
    const page = (await client.rpc("deadletters.list", { limit: 1000, ...(cursor ? { cursor } : {}) })) as {
      deadLetters: DeadLetter[];
      nextCursor?: string;
    };
    for (const l of page.deadLetters)
      if (!l.turn) out.push({ runId: l.runId, kind: l.kind, sessionKey: l.sessionKey, reason: l.reason });
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

/**
 * `switchboard deadletters [list [--limit n] [--cursor c]|replay <runId>|replay --all|discard <runId>]`: messages
 * whose turn was given up (storage unavailable past its deadline, or unrunnable data), never dropped.
 */
export async function deadLettersCommand(
  action: string | undefined,
  runId: string | undefined,
  opts: GlobalOptions & { json?: boolean; all?: boolean; limit?: string; cursor?: string },
): Promise<number> {
  // The command line is checked before Redis or a gateway is asked.
  const act = action ?? "list";
  if (act !== "list" && act !== "replay" && act !== "discard")
    throw new UsageError(`unknown action ${action} (list, replay, discard)`);
  if (act === "replay" && !runId && !opts.all) throw new UsageError("replay needs a runId or --all");
  if (act === "discard" && !runId) throw new UsageError("discard needs a runId");
  const limit = act === "list" ? positiveInt("--limit", opts.limit, 1000) : undefined;
  // Listing only reads: a client without BullMQ starts faster (cli/direct-client.ts).
  const client = await connect(opts, "direct", act === "list" ? "read" : "all");
  try {
    switch (act) {
      case "list": {
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
        const res = (await client.rpc("deadletters.replay", runId ? { runId } : { all: true })) as {
          count: number;
          replayed: { runId: string; replayedAs: string; sessionKey: string }[];
          refused?: NotReplayable[];
        };
        const left = runId ? [] : [...(await notReplayable(client)), ...(res.refused ?? [])];
        if (opts.json) {
          const { refused: _inLeft, ...replayed } = res;
          printJson(runId ? res : { ...replayed, notReplayable: left });
          return left.length ? EXIT.notOk : EXIT.ok;
        }
        for (const r of res.replayed)
          process.stdout.write(`replayed ${r.runId} as run ${r.replayedAs} on ${r.sessionKey}\n`);
        process.stdout.write(`${res.count} replayed\n`);
        if (left.length === 0) return EXIT.ok;
        const lines = left.map((l) => `  ${l.runId}  ${l.kind ?? "refused"}  ${l.sessionKey}: ${l.reason}`);
        process.stdout.write(
          terminalSafe(
            `${left.length} not replayable (no readable turn, or a session that cannot be made again):\n` +
              `${lines.join("\n")}\n` +
              `discard with: switchboard deadletters discard <runId>` +
              (left.length === 1 ? ` (switchboard deadletters discard ${left[0]!.runId})` : "") +
              "\n",
          ),
        );
        return EXIT.notOk;
      }
      case "discard": {
        const res = await client.rpc("deadletters.discard", { runId: runId! });
        if (opts.json) {
          printJson(res);
          return 0;
        }
        process.stdout.write(`discarded ${runId}\n`);
        return 0;
      }
    }
  } finally {
    await client.close();
  }
}

/**
 * `npm run bench`: Switchboard against bare BullMQ, figure by figure, on a private Redis.
 * Every figure is a ratio to a baseline measured in the same run (median of the rounds),
 * printed as `measured / target` with a pass/miss mark and written to BENCHMARKS.md.
 *
 *   npm run bench                      full run (a few minutes), writes BENCHMARKS.md
 *   npm run bench -- --quick           fewer units, same rounds (seconds); prints only
 *   npm run bench -- --only 1,5        some figures; prints only
 *   npm run bench -- --rounds 5        more rounds (at least 3)
 *   npm run bench -- --out FILE        write the report to FILE (also for --quick / --only)
 *
 * See bench/README.md for what each figure measures and what its baseline is.
 */
import { fileURLToPath } from "node:url";
import { benchClient, startBenchRedis } from "./harness/redis.js";
import { roundTrips } from "./harness/round-trips.js";
import { load1, machineFacts } from "./harness/machine.js";
import { renderTable, type FigureResult } from "./harness/report.js";
import { writeBenchmarksMd } from "./harness/benchmarks-md.js";
import type { BenchContext, Figure } from "./harness/context.js";
import { FIGURES } from "./figures/index.js";

interface Args {
  quick: boolean;
  only: string[] | undefined;
  rounds: number;
  out: string | undefined;
}

function parseArgs(argv: string[]): Args {
  const value = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const rounds = Number(value("rounds") ?? 3);
  if (!Number.isInteger(rounds) || rounds < 3)
    throw new Error("--rounds must be a whole number ≥ 3 (figures are medians of at least 3 rounds)");
  const only = value("only")
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const known = FIGURES.map((f) => f.id);
  const unknown = only?.filter((id) => !known.includes(id)) ?? [];
  if (unknown.length) throw new Error(`unknown figure(s) ${unknown.join(", ")} (known: ${known.join(", ")})`);
  return { quick: argv.includes("--quick"), only, rounds, out: value("out") };
}

async function main(): Promise<void> {
  // Switchboard's info logs (workers started…) would drown the progress lines.
  process.env.LOG_LEVEL ??= "warn";
  const args = parseArgs(process.argv.slice(2));
  // Before any client exists, so every connection of the systems under test is seen.
  roundTrips.install();
  const startedAt = new Date();
  const loadBefore = load1();
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const redis = await startBenchRedis();
  const admin = roundTrips.exclude(benchClient(redis.url));
  const results: FigureResult[] = [];
  try {
    const machine = await machineFacts(admin);
    const ctx: BenchContext = { redisUrl: redis.url, admin, quick: args.quick, rounds: args.rounds, log };
    const figures: Figure[] = FIGURES.filter((f) => !args.only || args.only.includes(f.id));
    log(
      `bench: ${args.quick ? "quick" : "full"}, ${args.rounds} rounds, ${machine.cores} cores, ` +
        `node ${machine.node}, redis ${machine.redisVersion}, load ${loadBefore.toFixed(2)}`,
    );
    for (const f of figures) {
      const t0 = Date.now();
      log(`(${f.id}) ${f.title}`);
      try {
        results.push(await f.run(ctx));
      } catch (err) {
        // A figure the current pipeline cannot run must not cost the others their numbers.
        const why = `failed: ${(err as Error).message.split("\n")[0]}`;
        log(`  ${why}`);
        results.push({
          id: f.id,
          title: f.title,
          setup: "",
          rows: [{ label: f.title, unit: "", baselineLabel: "", measured: [], baseline: [], skipped: why }],
          notes: [],
        });
      }
      log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    }
    const durationMs = Date.now() - startedAt.getTime();
    const loadAfter = load1();
    console.log(renderTable(results));
    console.log(
      `bench took ${(durationMs / 1000).toFixed(1)} s; load average ${loadBefore.toFixed(2)} before, ` +
        `${loadAfter.toFixed(2)} after (${machine.cores} cores)`,
    );
    const out =
      args.out ??
      (args.quick || args.only ? undefined : fileURLToPath(new URL("../../BENCHMARKS.md", import.meta.url)));
    if (out) {
      const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;
      writeBenchmarksMd(out, results, {
        command,
        quick: args.quick,
        rounds: args.rounds,
        startedAt,
        durationMs,
        machine,
        loadBefore,
        loadAfter,
      });
      console.log(`written to ${out}`);
    }
  } finally {
    admin.disconnect();
    await redis.stop();
  }
}

main().then(
  // Lingering handles (a closing socket) must not keep a finished bench alive.
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);

/**
 * The benchmark's arithmetic and reporting (bench/harness): medians, ratios, verdicts and the
 * BENCHMARKS.md text, and the client round-trip counter against real Redis. The benchmark
 * itself is not run here (`npm run bench`).
 */
import { afterAll, describe, expect, it } from "vitest";
import { newRedis, uniquePrefix } from "../helpers/context.js";
import { roundTrips } from "../../bench/harness/round-trips.js";
import {
  formatRatio,
  formatValue,
  median,
  percentile,
  perSecond,
  ratio,
  steadyRate,
} from "../../bench/harness/stats.js";
import { formatJudged, renderTable, summarize, type FigureResult, type Row } from "../../bench/harness/report.js";
import { renderBenchmarksMd } from "../../bench/harness/benchmarks-md.js";

describe("bench stats", () => {
  it("median: middle value, mean of the two middle ones, order-independent", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(() => median([])).toThrow();
  });

  it("percentile: nearest rank", () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 50)).toBe(50);
    expect(percentile(xs, 90)).toBe(90);
    expect(percentile(xs, 100)).toBe(100);
    expect(percentile([5, 1], 0)).toBe(1);
  });

  it("ratio: NaN without a usable baseline; formatted with an x", () => {
    expect(ratio(640, 3200)).toBeCloseTo(0.2);
    expect(ratio(1, 0)).toBeNaN();
    expect(formatRatio(0.174)).toBe("0.17x");
    expect(formatRatio(2)).toBe("2.00x");
    expect(formatRatio(12.34)).toBe("12.3x");
    expect(formatRatio(0.0432)).toBe("0.043x");
    expect(formatRatio(Number.NaN)).toBe("n/a");
    expect(formatValue(3623.4)).toBe("3,623");
    expect(formatValue(23.04)).toBe("23.0");
    expect(formatValue(1.234)).toBe("1.23");
  });

  it("perSecond and the steady-state rate ignore start-up and tail", () => {
    expect(perSecond(500, 2000)).toBe(250);
    // 100 finishes 10 ms apart, then a straggler 5 s later: the tail does not drag the rate down.
    const times = [...Array.from({ length: 100 }, (_, i) => 1000 + i * 10), 7000];
    expect(steadyRate(times)).toBeCloseTo(100, 0);
  });
});

describe("bench report", () => {
  const throughput: Row = {
    label: "turns/s",
    unit: "turns/s",
    baselineLabel: "bare jobs/s",
    measured: [600, 640, 700],
    baseline: [3000, 3200, 2800],
    target: { on: "ratio", op: ">=", value: 0.8 },
  };

  it("judges the median of per-round ratios against the target", () => {
    const s = summarize(throughput);
    expect(s.ratios.map((r) => Number(r.toFixed(3)))).toEqual([0.2, 0.2, 0.25]);
    expect(s.ratio).toBeCloseTo(0.2);
    expect(s.measured).toBe(640);
    expect(s.verdict).toBe("miss");
    expect(formatJudged(throughput, s)).toBe("0.20x / ≥ 0.80x");
    expect(summarize({ ...throughput, measured: [2900, 3000, 3100] }).verdict).toBe("pass");
  });

  it("absolute targets judge the measured median; untargeted rows are information; skipped rows say why", () => {
    const rt: Row = {
      label: "round trips per turn",
      unit: "round trips",
      baselineLabel: "bare",
      measured: [4, 6, 5],
      baseline: [2, 2, 2],
      target: { on: "measured", op: "<=", value: 5 },
    };
    const s = summarize(rt);
    expect(s.verdict).toBe("pass");
    expect(formatJudged(rt, s)).toBe("5.00 round trips / ≤ 5 round trips");
    expect(summarize({ ...rt, target: undefined }).verdict).toBe("info");
    const skipped = summarize({ ...rt, measured: [], baseline: [], skipped: "not supported" });
    expect(skipped.verdict).toBe("skipped");
    expect(
      renderTable([
        { id: "9", title: "t", setup: "", rows: [{ ...rt, measured: [], skipped: "not supported" }], notes: [] },
      ]),
    ).toContain("skipped: not supported");
  });

  it("BENCHMARKS.md carries the machine facts, the command, every round and a shared-machine note", () => {
    const fig: FigureResult = { id: "1", title: "Turns", setup: "3000 turns", rows: [throughput], notes: ["a note"] };
    const md = renderBenchmarksMd([fig], {
      command: "npm run bench",
      quick: false,
      rounds: 3,
      startedAt: new Date("2026-11-23T10:00:00Z"),
      durationMs: 120_000,
      machine: {
        cores: 2,
        cpuModel: "Test CPU",
        memGiB: 8,
        platform: "linux",
        node: "v20.0.0",
        redisVersion: "7.0.15",
      },
      loadBefore: 9.5,
      loadAfter: 3,
    });
    for (const s of [
      "2026-11-23T10:00:00.000Z",
      "`npm run bench`",
      "2 cores",
      "node v20.0.0",
      "redis-server 7.0.15",
      "shared with other work",
      "| 3 | 700 turns/s | 2,800 turns/s | 0.25x |",
      "**0.20x**",
      "✗ MISS",
      "- a note",
    ]) {
      expect(md).toContain(s);
    }
    const quiet = renderBenchmarksMd([fig], {
      command: "x",
      quick: true,
      rounds: 3,
      startedAt: new Date(),
      durationMs: 1,
      machine: { cores: 2, cpuModel: "c", memGiB: 1, platform: "p", node: "n", redisVersion: "r" },
      loadBefore: 0.5,
      loadAfter: 1,
    });
    expect(quiet).not.toContain("shared with other work");
  });
});

describe("bench round-trip counter (real Redis)", () => {
  const redis = newRedis();
  const excluded = roundTrips.exclude(newRedis());
  afterAll(() => {
    redis.disconnect();
    excluded.disconnect();
  });

  it("one round trip per lone command, pipeline or MULTI; scripts named; excluded clients not counted", async () => {
    roundTrips.install();
    roundTrips.install(); // idempotent: the prototype is wrapped once
    const k = uniquePrefix("rt");
    redis.defineCommand("bench_probe", { numberOfKeys: 1, lua: "return redis.call('GET', KEYS[1])" });
    const probe = (key: string) =>
      (redis as unknown as { bench_probe(key: string): Promise<unknown> }).bench_probe(key);
    await probe(k); // loads the script: the counted call below is a plain EVALSHA
    roundTrips.start();
    await redis.set(k, "1");
    await redis.pipeline().get(k).get(k).get(k).exec();
    await redis.multi().incr(k).incr(k).exec();
    expect(await probe(k)).toBe("3");
    await excluded.get(k);
    const c = roundTrips.stop();
    expect(c.roundTrips).toBe(4);
    expect(c.commands).toBe(1 + 3 + 4 + 1); // MULTI, 2 x INCR, EXEC
    expect(c.byName.get("evalsha:bench_probe")).toBe(1);
    expect(c.byName.get("get")).toBe(3);
    await redis.get(k); // not counting once stopped
    expect(c.commands).toBe(9);
    await redis.del(k);
  });
});

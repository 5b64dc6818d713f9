/**
 * A small reader of the Prometheus text exposition format for tests: samples with their labels,
 * and the metric families declared by `# TYPE` lines.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** Family name → type, from `# TYPE` lines (each must appear once). */
  types: Map<string, string>;
  /** Families declared by more than one `# TYPE` line (invalid exposition). */
  duplicateTypes: string[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const duplicateTypes: string[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(/\s+/);
      if (types.has(name!)) duplicateTypes.push(name!);
      types.set(name!, type!);
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, types, duplicateTypes };
}

/** Samples named `name` whose labels include `labels`. */
export function samplesOf(e: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The sum of the matching samples' values (0 when none). */
export function valueOf(e: Exposition, name: string, labels: Record<string, string> = {}): number {
  return samplesOf(e, name, labels).reduce((sum, s) => sum + s.value, 0);
}

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${text}`);
  return parseExposition(text);
}

/** The metrics URL a `switchboard worker` process printed in its ready line (`workers.metricsPort`). */
export function metricsUrlOf(proc: { output(): string }): string {
  const m = /metrics at (http:\/\/\S+\/metrics)/.exec(proc.output());
  if (!m) throw new Error(`no metrics URL in the process output:\n${proc.output()}`);
  return m[1]!;
}

/**
 * The in-process gateway's metrics, read to count from. prom-client's registry is the process's,
 * and test files may share a process (vitest's `isolate: false`): a test asserts on the change
 * since a snapshot it took itself (`since`), never on a total.
 */
export async function gatewayMetrics(sys: { get(path: string): Promise<{ body: unknown }> }): Promise<Exposition> {
  return parseExposition(String((await sys.get("/metrics")).body));
}

/** How much the matching samples grew from `before` to `after`. */
export function since(
  before: Exposition,
  after: Exposition,
  name: string,
  labels: Record<string, string> = {},
): number {
  return valueOf(after, name, labels) - valueOf(before, name, labels);
}

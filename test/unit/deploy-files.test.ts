/**
 * Dockerfile and docker-compose.yml, checked by reading them (no Docker engine needed): the
 * compose file parses; every Switchboard service runs a real `switchboard` subcommand with real
 * flags (health checks included); every environment variable it sets is one Switchboard reads;
 * the config file it names exists in the image and is valid with that environment; ports, the
 * state volume and the health check agree with that config; the Dockerfile is multi-stage, runs
 * as a non-root user with `switchboard` as entry point, ships production dependencies only and
 * copies only files that exist in the build context.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { ENV_OVERRIDES, loadConfig } from "../../src/config/load.js";
import { CLI, ROOT } from "../helpers/system.js";

interface Service {
  image?: string;
  build?: { context: string; target?: string };
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  restart?: string;
}

const compose = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>;
};
const services = compose.services;
const switchboardServices = Object.entries(services).filter(([, s]) => s.build !== undefined);

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  name: string;
  base: string;
  instructions: Instruction[];
}

/** Dockerfile → stages of instructions (continuation lines joined, comments dropped). */
function parseDockerfile(text: string): { args: Instruction[]; stages: Stage[] } {
  const logical = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const out: { args: Instruction[]; stages: Stage[] } = { args: [], stages: [] };
  for (const line of logical) {
    const m = /^(\S+)\s+(.*)$/.exec(line)!;
    const ins = { op: m[1]!.toUpperCase(), args: m[2]! };
    if (ins.op === "FROM") {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args)!;
      out.stages.push({ base: f[1]!, name: f[2] ?? String(out.stages.length), instructions: [] });
    } else if (out.stages.length === 0) out.args.push(ins);
    else out.stages.at(-1)!.instructions.push(ins);
  }
  return out;
}

const dockerfile = parseDockerfile(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
const runtime = dockerfile.stages.at(-1)!;
const find = (stage: Stage, op: string) => stage.instructions.filter((i) => i.op === op);
const jsonArgs = (i: Instruction | undefined) => (i ? (JSON.parse(i.args) as string[]) : undefined);
const WORKDIR = find(runtime, "WORKDIR").at(-1)!.args;

/** Where a path inside the image comes from in the repository (per the runtime stage's COPYs). */
function repoPathOf(imagePath: string): string | undefined {
  for (const c of find(runtime, "COPY")) {
    if (c.args.startsWith("--from")) continue;
    const [src, dest] = c.args.split(/\s+/) as [string, string];
    if (!statSync(join(ROOT, src)).isDirectory()) continue; // a single file: not where configs live
    const destAbs = dest.startsWith("/") ? dest : join(WORKDIR, dest);
    if (imagePath === destAbs || imagePath.startsWith(`${destAbs.replace(/\/$/, "")}/`))
      return join(ROOT, src, imagePath.slice(destAbs.replace(/\/$/, "").length));
  }
  return undefined;
}

/** The environment a service's processes see, with compose's `${VAR:-default}` at its default. */
function envOf(s: Service): Record<string, string> {
  return Object.fromEntries(
    Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v).replace(/\$\{\w+:-([^}]*)\}/g, "$1")]),
  );
}

function switchboardHelp(args: string[]): { code: number | null; text: string } {
  const r = spawnSync(process.execPath, [CLI, ...args, "--help"], { encoding: "utf8", timeout: 20_000 });
  return { code: r.status, text: r.stdout };
}

/** `switchboard <sub> [--flags…]`: the subcommand exists and accepts every flag given. */
function expectRealCommand(argv: string[], where: string): void {
  const help = switchboardHelp([argv[0]!]);
  expect(help.code, `${where}: switchboard ${argv[0]} --help`).toBe(0);
  expect(help.text, where).toMatch(new RegExp(`^Usage: switchboard ${argv[0]}\\b`));
  for (const flag of argv.filter((a) => a.startsWith("--")))
    expect(help.text, `${where}: ${flag}`).toContain(flag.split("=")[0]);
}

describe("docker-compose.yml", () => {
  it("parses, with Redis and two gateways and workers built from the Dockerfile", () => {
    expect(Object.keys(services).sort()).toEqual(["gateway", "gateway-2", "redis", "worker"]);
    for (const [name, s] of switchboardServices) {
      expect(s.build!.context, name).toBe(".");
      expect(
        dockerfile.stages.map((st) => st.name),
        name,
      ).toContain(s.build!.target);
      expect(s.depends_on?.redis?.condition, name).toBe("service_healthy");
      expect(s.healthcheck?.test, `${name} has a health check`).toBeDefined();
    }
    expect(switchboardServices.map(([n]) => n).sort()).toEqual(["gateway", "gateway-2", "worker"]);
    expect(services.redis!.healthcheck?.test).toEqual(["CMD", "redis-cli", "ping"]);
    expect(services.redis!.command).toEqual(expect.arrayContaining(["--maxmemory-policy", "noeviction"]));
  });

  it("every service command and health check is a real switchboard subcommand with real flags", () => {
    for (const [name, s] of switchboardServices) {
      expect(s.command, name).toBeDefined();
      expectRealCommand(s.command!, `${name} command`);
      const hc = s.healthcheck!.test;
      if (hc[1] === "switchboard") expectRealCommand(hc.slice(2), `${name} healthcheck`);
    }
    expect(services.gateway!.command).toEqual(["gateway"]);
    expect(services["gateway-2"]!.command).toEqual(["gateway"]);
    expect(services.worker!.command![0]).toBe("worker");
    expect(services.worker!.healthcheck!.test).toEqual(["CMD", "switchboard", "doctor", "--alive", "worker"]);
  });

  it("sets only env variables Switchboard reads; its config file exists in the image and is valid with them", () => {
    const known = new Set<string>([
      ...ENV_OVERRIDES.map((o) => o.env),
      "SWITCHBOARD_CONFIG",
      "LOG_LEVEL",
      "SWITCHBOARD_URL",
    ]);
    for (const [name, s] of switchboardServices) {
      const env = envOf(s);
      for (const k of Object.keys(env)) expect(known.has(k), `${name}: ${k} is read by Switchboard`).toBe(true);
      const file = repoPathOf(env.SWITCHBOARD_CONFIG!);
      expect(file && existsSync(file), `${name}: ${env.SWITCHBOARD_CONFIG} comes from the repository`).toBeTruthy();
      // A required variable (`${X:?why}`) as the operator sets it: a value, not the placeholder.
      const given = Object.fromEntries(
        Object.entries(env).map(([k, v]) => [k, v.replace(/^\$\{\w+:\?[^}]*\}$/, "value-set-by-the-operator")]),
      );
      const { config } = loadConfig({ file: file!, env: given });
      // Redis is a service of this file; storage is the mounted volume; the port is published.
      expect(Object.keys(services)).toContain(new URL(config.redis.url).hostname);
      expect(s.volumes, name).toContain(`transcripts:${config.storage.dir}`);
      expect(config.storage.dir).toBe(find(runtime, "VOLUME").map((v) => jsonArgs(v)![0])[0]);
      if (s.command![0] === "gateway") {
        expect(config.gateway.host, name).toBe("0.0.0.0");
        expect(
          s.ports!.map((p) => Number(p.split(":").at(-1))),
          name,
        ).toEqual([config.gateway.port]);
        expect(s.healthcheck!.test.join(" "), name).toContain(`http://127.0.0.1:${config.gateway.port}/readyz`);
      }
    }
    // Two gateways, two host ports, published on the host's loopback only (the token still guards them).
    const published = [...services.gateway!.ports!, ...services["gateway-2"]!.ports!];
    expect(new Set(published.map((p) => p.split(":").at(-2))).size).toBe(2);
    for (const p of published) expect(p.startsWith("127.0.0.1:"), p).toBe(true);
  });

  it("has no default token, and every service (Redis too) comes back after a crash or reboot", () => {
    for (const [name, s] of switchboardServices) {
      // `${VAR:?message}`: compose refuses to start without it, rather than fall back to a known one.
      expect(envOf(s).SWITCHBOARD_TOKEN, name).toMatch(/^\$\{SWITCHBOARD_TOKEN:\?[^}]+\}$/);
    }
    for (const [name, s] of Object.entries(services)) expect(s.restart, name).toBe("unless-stopped");
  });

  it("the gateway health check runs under plain node (the image has no curl) and judges /readyz by its status", () => {
    const code = services.gateway!.healthcheck!.test[3]!;
    expect(services.gateway!.healthcheck!.test.slice(0, 3)).toEqual(["CMD", "node", "-e"]);
    // Run it against nothing: it must fail (exit 1), not hang or throw a stack.
    const r = spawnSync(process.execPath, ["-e", code.replace("127.0.0.1:7420", "127.0.0.1:1")], {
      encoding: "utf8",
      timeout: 10_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe("");
  });
});

describe("Dockerfile", () => {
  it("is multi-stage: dev dependencies to build, production dependencies to run", () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    const build = dockerfile.stages.find((s) => find(s, "RUN").some((r) => r.args.includes("npm run build")))!;
    expect(build, "a stage runs the build").toBeDefined();
    expect(find(build, "RUN").some((r) => /npm ci(?!.*--omit=dev)/.test(r.args))).toBe(true);
    const copiesFrom = find(runtime, "COPY").filter((c) => c.args.startsWith("--from"));
    const nodeModules = copiesFrom.find((c) => /node_modules/.test(c.args))!;
    const depsStage = dockerfile.stages.find((s) => s.name === /--from=(\S+)/.exec(nodeModules.args)![1])!;
    expect(
      find(depsStage, "RUN").some((r) => /npm ci .*--omit=dev/.test(r.args)),
      "runtime node_modules are production-only",
    ).toBe(true);
    expect(copiesFrom.some((c) => c.args.includes(`--from=${build.name}`) && /\/app\/dist/.test(c.args))).toBe(true);
  });

  it("runs as a non-root user, with `switchboard` as entry point and the state dir as a volume", () => {
    const user = find(runtime, "USER").at(-1)?.args;
    expect(user).toBeDefined();
    expect(["root", "0"]).not.toContain(user);
    expect(jsonArgs(find(runtime, "ENTRYPOINT").at(-1))).toEqual(["switchboard"]);
    const link = find(runtime, "RUN")
      .map((r) => /ln -s (\S+) \/usr\/local\/bin\/switchboard/.exec(r.args))
      .find(Boolean)!;
    expect(link, "switchboard is on the PATH").toBeTruthy();
    // The link points at the package's own bin, which the build produces (with its shebang).
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { bin: { switchboard: string } };
    expect(link[1]).toBe(join(WORKDIR, pkg.bin.switchboard));
    expect(readFileSync(join(ROOT, pkg.bin.switchboard), "utf8").startsWith("#!/usr/bin/env node\n")).toBe(true);
    const stateDir = find(runtime, "ENV")
      .map((e) => /SWITCHBOARD_STATE_DIR=(\S+)/.exec(e.args)?.[1])
      .find(Boolean);
    expect(jsonArgs(find(runtime, "VOLUME")[0])).toEqual([stateDir]);
    expect(
      find(runtime, "RUN").some((r) => r.args.includes(`chown ${user}:${user} ${stateDir}`)),
      "the state dir belongs to that user",
    ).toBe(true);
  });

  it("copies only files that exist in the build context and are not excluded by .dockerignore", () => {
    const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    for (const stage of dockerfile.stages) {
      for (const c of find(stage, "COPY").filter((x) => !x.args.startsWith("--from"))) {
        const sources = c.args.split(/\s+/).slice(0, -1);
        for (const src of sources) {
          expect(existsSync(join(ROOT, src)), `${stage.name}: COPY ${src}`).toBe(true);
          expect(ignored, `${stage.name}: COPY ${src} is not ignored`).not.toContain(src);
        }
      }
    }
  });
});

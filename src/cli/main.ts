#!/usr/bin/env node
/**
 * `switchboard`: one CLI for the all-in-one process, the gateway, workers and operator
 * commands (README "Processes"). Errors print as one line with their stable code on stderr (and,
 * with --json, as `{"ok":false,"error":{…}}` on stdout); exit codes in output.ts `EXIT`.
 */
import { Command, CommanderError } from "commander";
import { SwitchboardError } from "../errors/index.js";
import { ConfigError } from "../errors/index.js";
import { UsageError } from "./flags.js";
import { EXIT, jsonError, printJson } from "./output.js";
import type { McpOptions } from "./commands/mcp.js";
import type { GlobalOptions } from "./client.js";
import { startProgress, stopProgress } from "./progress.js";
import { QUEUE_NAMES } from "../queues/queue-names.js";

// Each command's module (and what it pulls in: fastify, the MCP SDK, SQLite, …) is loaded only
// when that command runs, so a worker or a quick `status` starts fast.
type Lazy<F extends (...a: never[]) => unknown> = (...args: Parameters<F>) => Promise<Awaited<ReturnType<F>>>;
const callCommand: Lazy<typeof import("./commands/call.js").callCommand> = async (...args) =>
  (await import("./commands/call.js")).callCommand(...args);
const configValidate: Lazy<typeof import("./commands/config-validate.js").configValidate> = async (...args) =>
  (await import("./commands/config-validate.js")).configValidate(...args);
const deadLettersCommand: Lazy<typeof import("./commands/deadletters.js").deadLettersCommand> = async (...args) =>
  (await import("./commands/deadletters.js")).deadLettersCommand(...args);
const historyCommand: Lazy<typeof import("./commands/history.js").historyCommand> = async (...args) =>
  (await import("./commands/history.js")).historyCommand(...args);
const mcpCommand: Lazy<typeof import("./commands/mcp.js").mcpCommand> = async (...args) =>
  (await import("./commands/mcp.js")).mcpCommand(...args);
const importOpenClawCommand: Lazy<typeof import("./commands/import.js").importOpenClawCommand> = async (...args) =>
  (await import("./commands/import.js")).importOpenClawCommand(...args);
const sendCommand: Lazy<typeof import("./commands/send.js").sendCommand> = async (...args) =>
  (await import("./commands/send.js")).sendCommand(...args);
const serveCommand: Lazy<typeof import("./commands/serve.js").serveCommand> = async (...args) =>
  (await import("./commands/serve.js")).serveCommand(...args);
const sessionsCommand: Lazy<typeof import("./commands/sessions.js").sessionsCommand> = async (...args) =>
  (await import("./commands/sessions.js")).sessionsCommand(...args);
const statusCommand: Lazy<typeof import("./commands/status.js").statusCommand> = async (...args) =>
  (await import("./commands/status.js")).statusCommand(...args);
const doctorCommand: Lazy<typeof import("./commands/doctor.js").doctorCommand> = async (...args) =>
  (await import("./commands/doctor.js")).doctorCommand(...args);

const program = new Command("switchboard")
  .description("Session gateway for AI agents on BullMQ + Redis")
  .option("--config <file>", "config file (JSON5); default $SWITCHBOARD_CONFIG or ~/.switchboard/switchboard.json5")
  .option("--url <url>", "gateway URL (or $SWITCHBOARD_URL)")
  .option(
    "--token <token>",
    "gateway bearer token (or $SWITCHBOARD_TOKEN): the one start/gateway ask for, the one other commands present",
  )
  .showHelpAfterError()
  // Parse errors (unknown command or flag, missing argument) come to the handler at the end, to
  // exit with the usage code and, with --json, answer in JSON; subcommands inherit this.
  .exitOverride();

// `switchboard sessions | head -3`: the reader has gone, so the output is over; not an error.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(exitCode);
  throw err;
});

const g = (cmd: Command): GlobalOptions => cmd.optsWithGlobals() as GlobalOptions;
let exitCode = 0;
/**
 * Whether errors are answered as JSON on stdout too: the running command's --json, or, for an
 * error in the command line itself (no command runs), a --json anywhere in it.
 */
let jsonErrors = process.argv.slice(2).includes("--json");
/** An action's exit code, when it returns one (actions that return nothing exit 0). */
type Action = (...a: never[]) => Promise<unknown> | number;
const run =
  (fn: Action) =>
  async (...args: unknown[]) => {
    const cmd = args.at(-1);
    if (cmd instanceof Command) jsonErrors = Boolean(cmd.opts().json);
    const code = await (fn as (...a: unknown[]) => Promise<unknown> | number)(...args);
    if (typeof code === "number") exitCode = code;
  };
/** An operator command: a spinner on a terminal once it runs over a second (cli/progress.ts). */
const op = (label: string, fn: Action) =>
  run(async (...args: never[]) => {
    startProgress(label);
    try {
      return await fn(...args);
    } finally {
      stopProgress();
    }
  });
const forceHelp = "start even when this config's agents, runtimes or settings differ from the running deployment's";

program
  .command("start")
  .option("--force", forceHelp)
  .description("gateway + workers in one process (starts its own redis-server when none is configured)")
  .action(run(async (_o: unknown, cmd: Command) => serveCommand("start", g(cmd))));
program
  .command("gateway")
  .option("--force", forceHelp)
  .description("HTTP gateway only (stateless; scale behind a load balancer)")
  .action(run(async (_o: unknown, cmd: Command) => serveCommand("gateway", g(cmd))));
program
  .command("worker")
  .description("BullMQ workers only (scale out on any number of hosts)")
  .option("--queues <list>", `comma-separated: ${QUEUE_NAMES.join(",")} (default all)`)
  .option("--concurrency <n>", "jobs in parallel per queue")
  .option("--force", forceHelp)
  .action(run(async (_o: unknown, cmd: Command) => serveCommand("worker", g(cmd) as never)));
program
  .command("status")
  .description("gateway, Redis, queue depths, workers, recent sessions")
  .option("--json")
  .action(op("asking the gateway and Redis…", async (_o: unknown, cmd: Command) => statusCommand(g(cmd))));
program
  .command("sessions")
  .summary("list sessions (200 by default; --limit N, --all pages through every one)")
  .description(
    "list sessions, newest first (200 by default; --limit N, --all pages through every one). " +
      "Not a snapshot: a session updated during a long listing is shown once, as it was last read",
  )
  .option("--json")
  .option("--active <minutes>")
  .option("--agent <id>")
  .option("--limit <n>", "the N most recently updated sessions")
  .option("--all", "every session (paged oldest first by a cursor, so none is missed; printed newest first)")
  .action(op("listing sessions…", async (_o: unknown, cmd: Command) => sessionsCommand(g(cmd))));
program
  .command("send <sessionKey> <message>")
  .summary("enqueue a message into a session (--wait: and print its reply)")
  .description(
    "enqueue a message into a session; with --wait, print its reply (its runId first, on stderr: " +
      "if the wait fails or is interrupted, the run goes on; exit 3 or 130, do not send again)",
  )
  .option("--wait <seconds>", "wait up to this long for the reply (0-600); retried on another gateway if one goes away")
  .option("--agent <id>")
  .option("--json")
  .action(
    op("sending…", async (key: string, message: string, _o: unknown, cmd: Command) =>
      sendCommand(key, message, g(cmd)),
    ),
  );
program
  .command("history <sessionKey>")
  .description("print a transcript")
  .option("--limit <n>")
  .option("--json")
  .action(op("reading the transcript…", async (key: string, _o: unknown, cmd: Command) => historyCommand(key, g(cmd))));
program
  .command("call [method]")
  .description("call a gateway RPC method (--list: the methods)")
  .option("--params <json>")
  .option("--list", "list the RPC methods with a one-line description")
  .option("--json", "with --list: as JSON")
  .action(op("calling…", async (method: string | undefined, _o: unknown, cmd: Command) => callCommand(method, g(cmd))));
program
  .command("deadletters [action] [runId]")
  .description("messages whose turn was given up: list | replay <runId> | replay --all | discard <runId>")
  .option("--all", "with replay: every dead letter")
  .option("--limit <n>", "with list: at most this many (oldest first), and the cursor of the next page")
  .option("--cursor <cursor>", "with list: the page after this cursor (printed by list --limit)")
  .option("--json")
  .action(
    op("working…", async (action: string | undefined, runId: string | undefined, _o: unknown, cmd: Command) =>
      deadLettersCommand(action, runId, g(cmd)),
    ),
  );
program
  .command("doctor")
  .description("check the deployment: Redis, storage, config, queues, clocks; exit 0 when healthy, 1 with the reasons")
  .option("--json")
  .option(
    "--alive <role>",
    "only: is a `switchboard <role>` process on this host heartbeating? (a container health check)",
  )
  .action(op("checking…", async (_o: unknown, cmd: Command) => doctorCommand(g(cmd) as never)));
program
  .command("mcp")
  .description("the session tools over MCP (stdio, or streamable HTTP with --http), acting as one session")
  .requiredOption("--session <key>", "the session the MCP client acts as (its visibility and tool profile apply)")
  .option("--http <port>", "serve streamable HTTP on this port (0: any free port) at /mcp instead of stdio")
  .option("--host <host>", "with --http: address to listen on (default 127.0.0.1)")
  .action(run(async (_o: unknown, cmd: Command) => mcpCommand(g(cmd) as McpOptions)));
program
  .command("import")
  .description("import sessions and transcripts from another system")
  .command("openclaw [stateDir]")
  .description("import an OpenClaw/Clawdbot state dir (both sessions.json + JSONL and the SQLite store); idempotent")
  .option("--dry-run", "read and compare only: report what would be imported, write nothing")
  .option("--json", "print the full report as JSON")
  .option("--concurrency <n>", "sessions written at once (default 8)")
  .option("--no-progress", "no progress bar or progress lines")
  .action(
    run(async (stateDir: string | undefined, _o: unknown, cmd: Command) =>
      importOpenClawCommand(stateDir, g(cmd) as never),
    ),
  );
program
  .command("config")
  .description("configuration")
  .command("validate [file]")
  .option("--json")
  .action(run((file: string | undefined, _o: unknown, cmd: Command) => configValidate(file, g(cmd))));

program.parseAsync(process.argv).then(
  () => {
    if (exitCode) process.exitCode = exitCode;
  },
  (err: unknown) => {
    if (err instanceof CommanderError) {
      // --help and --version end this way too (exit 0); commander has printed its message already.
      if (err.exitCode === 0) return;
      const message =
        err.code === "commander.help" ? "a command is needed (switchboard --help lists them)" : err.message;
      if (jsonErrors) printJson(jsonError("invalid_request", message.replace(/^error: /, "")));
      process.exitCode = EXIT.usage;
      return;
    }
    if (err instanceof ConfigError) {
      const where = err.source ? `config file ${err.source}` : "config (no file: defaults and environment variables)";
      process.stderr.write(
        `error [invalid_config]: ${where}:\n${err.issues.map((i) => `  ${i.path}: ${i.message}`).join("\n")}\n`,
      );
      if (jsonErrors) {
        const message = `${where}: ${err.issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`;
        printJson({ ok: false, error: { code: "invalid_config", message, issues: err.issues } });
      }
    } else if (err instanceof SwitchboardError) {
      process.stderr.write(`error [${err.code}]: ${err.message}\n`);
      if (jsonErrors) printJson(jsonError(err.code, err.message));
    } else {
      const message = (err as Error)?.message ?? String(err);
      process.stderr.write(`error: ${message}\n`);
      if (jsonErrors) printJson(jsonError("internal", message));
    }
    process.exitCode = err instanceof UsageError ? EXIT.usage : EXIT.error;
  },
);

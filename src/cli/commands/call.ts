import { UsageError } from "../flags.js";
import { connect, type GlobalOptions } from "../client.js";
import { printJson } from "../output.js";
import { RPC_CATALOG } from "../../rpc/catalog.js";
import { READ_RPC_METHODS } from "../../rpc/read-methods.js";

/** `switchboard call --list`: every RPC method with its one-line description (no connection needed). */
export function listRpcMethods(opts: { json?: boolean } = {}): number {
  const names = Object.keys(RPC_CATALOG).sort();
  if (opts.json) {
    printJson(names.map((method) => ({ method, summary: RPC_CATALOG[method]!.summary })));
    return 0;
  }
  const width = Math.max(...names.map((n) => n.length));
  process.stdout.write(`${names.map((n) => `${n.padEnd(width)}  ${RPC_CATALOG[n]!.summary}`).join("\n")}\n`);
  return 0;
}

/** `switchboard call <method> [--params JSON]`: any gateway RPC method. */
export async function callCommand(
  method: string | undefined,
  opts: GlobalOptions & { params?: string; list?: boolean; json?: boolean },
): Promise<number> {
  if (opts.list || !method) {
    if (!opts.list) process.stderr.write("usage: switchboard call <method> [--params JSON]; the methods:\n");
    listRpcMethods(opts);
    return opts.list ? 0 : 1;
  }
  let params: unknown = {};
  if (opts.params) {
    try {
      params = JSON.parse(opts.params);
    } catch (err) {
      throw new UsageError(`--params is not valid JSON: ${(err as Error).message}`);
    }
  }
  // Without a gateway, a read method runs on a client without BullMQ (cli/direct-client.ts).
  const reads = (READ_RPC_METHODS as readonly string[]).includes(method);
  const client = await connect(opts, "http", reads ? "read" : "all");
  try {
    printJson(await client.rpc(method, params));
    return 0;
  } finally {
    await client.close();
  }
}

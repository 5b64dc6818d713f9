import { ValidationError } from "../../errors/index.js";
import { connect, type GlobalOptions } from "../client.js";
import { printJson } from "../output.js";

/** `switchboard call <method> [--params JSON]`: any gateway RPC method. */
export async function callCommand(method: string, opts: GlobalOptions & { params?: string }): Promise<number> {
  let params: unknown = {};
  if (opts.params) {
    try {
      params = JSON.parse(opts.params);
    } catch (err) {
      throw new ValidationError(`--params is not valid JSON: ${(err as Error).message}`);
    }
  }
  const client = await connect(opts);
  try {
    printJson(await client.rpc(method, params));
    return 0;
  } finally {
    await client.close();
  }
}

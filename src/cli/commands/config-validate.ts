import { ConfigError } from "../../errors/index.js";
import { loadConfig } from "../../config/load.js";

/** `switchboard config validate [FILE]`: exit 1 with every problem as `path: message`. */
export function configValidate(file: string | undefined, opts: { config?: string; json?: boolean }): number {
  const target = file ?? opts.config;
  try {
    const loaded = loadConfig(target ? { file: target } : {});
    const { path } = loaded;
    // Valid, but unable to work in this environment (an unset apiKeyEnv): said, not refused,
    // since the workers may run elsewhere with the variable set.
    const warnings = [...loaded.warnings, ...loaded.environmentWarnings];
    if (opts.json) process.stdout.write(`${JSON.stringify({ ok: true, path: path ?? null, warnings })}\n`);
    else {
      for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
      process.stdout.write(`${path ?? "(no config file: all defaults)"}: valid\n`);
    }
    return 0;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    if (opts.json) process.stdout.write(`${JSON.stringify({ ok: false, issues: err.issues })}\n`);
    else for (const i of err.issues) process.stderr.write(`${i.path}: ${i.message}\n`);
    return 1;
  }
}

import { pino, type Logger } from "pino";

/** JSON logs to stderr (stdout stays clean for CLI output); level from $LOG_LEVEL. */
export function createLogger(name: string): Logger {
  return pino({ name, level: process.env.LOG_LEVEL ?? "info" }, pino.destination(2));
}

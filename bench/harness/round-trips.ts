/**
 * Client-side Redis round trips of everything in this process, by wrapping ioredis's
 * `Redis.prototype.sendCommand` (the one method every command, pipelined or not, goes through).
 *
 * What is counted, exactly:
 *  - commands: every command handed to a connection (a Lua call is one EVALSHA; an EVALSHA
 *    that misses the script cache and is resent as EVAL counts twice, as it costs twice);
 *  - round trips: a command sent on its own is one; a pipeline or MULTI/EXEC transaction is
 *    one however many commands it holds (ioredis writes a pipeline's commands in one batch:
 *    those commands carry `pipelineIndex`, and only index 0 is counted). Blocking commands
 *    (BZPOPMIN of an idle BullMQ worker) are round trips too.
 *  - not counted: clients the bench excluded (its own admin and probe clients) and
 *    subscriber-mode traffic (pushed messages are not requests).
 * Evalsha calls are named after their script (`evalsha:<name>`) where the client knows the
 * script by name (ioredis `defineCommand`, which both BullMQ and Switchboard use).
 */
import { Redis } from "ioredis";

interface SentCommand {
  name: string;
  args: unknown[];
  pipelineIndex?: number;
}
interface ScriptLike {
  sha: string;
}

export interface RoundTripCounts {
  roundTrips: number;
  commands: number;
  /** Client commands by name (evalsha by script name where known). */
  byName: Map<string, number>;
}

class RoundTripCounter {
  private installed = false;
  private active = false;
  private readonly excluded = new WeakSet<object>();
  private counts: RoundTripCounts = { roundTrips: 0, commands: 0, byName: new Map() };

  install(): void {
    if (this.installed) return;
    this.installed = true;
    const proto = Redis.prototype as unknown as {
      sendCommand: (this: Redis, command: SentCommand, stream?: { isPipeline?: boolean }) => unknown;
    };
    const original = proto.sendCommand;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const counter = this;
    proto.sendCommand = function (this: Redis, command: SentCommand, stream?: { isPipeline?: boolean }) {
      if (counter.active && !counter.excluded.has(this)) counter.record(this, command, stream);
      return original.call(this, command, stream);
    };
  }

  private record(client: Redis, command: SentCommand, stream?: { isPipeline?: boolean }): void {
    const c = this.counts;
    c.commands++;
    if (!stream?.isPipeline || command.pipelineIndex === 0) c.roundTrips++;
    const name =
      command.name === "evalsha" ? `evalsha:${scriptName(client, String(command.args[0] ?? ""))}` : command.name;
    c.byName.set(name, (c.byName.get(name) ?? 0) + 1);
  }

  /** The bench's own clients (snapshots, probes) are not the system under test. */
  exclude(client: Redis): Redis {
    this.excluded.add(client);
    return client;
  }

  start(): void {
    this.counts = { roundTrips: 0, commands: 0, byName: new Map() };
    this.active = true;
  }

  stop(): RoundTripCounts {
    this.active = false;
    return this.counts;
  }
}

function scriptName(client: Redis, sha: string): string {
  const scripts = (client as unknown as { scriptsSet?: Record<string, ScriptLike> }).scriptsSet ?? {};
  for (const [name, s] of Object.entries(scripts)) if (s.sha === sha) return name;
  return sha.slice(0, 8);
}

/** One counter per process: the prototype is patched once. */
export const roundTrips = new RoundTripCounter();

/**
 * Every Redis key Switchboard owns, in one place. All keys share the `{prefix}` hash tag so a
 * Lua script touching an entry and its indexes stays within one Redis Cluster slot. BullMQ's
 * own keys use the same tag as their `prefix` (see queues), never ioredis `keyPrefix`.
 */
export class RedisKeys {
  /** `{sb}`: the hash-tagged base every key starts with. */
  readonly base: string;

  constructor(prefix: string) {
    this.base = `{${prefix}}`;
  }

  /** BullMQ's `prefix` option: queues live at `{sb}:q:<queue>:…`. */
  get bullPrefix(): string {
    return `${this.base}:q`;
  }

  session(sessionKey: string): string {
    return `${this.base}:s:${sessionKey}`;
  }
  updatedIndex(): string {
    return `${this.base}:idx:updated`;
  }
  agentIndex(agentId: string): string {
    return `${this.base}:idx:agent:${agentId}`;
  }
  kindIndex(kind: string): string {
    return `${this.base}:idx:kind:${kind}`;
  }
  sessionIdIndex(): string {
    return `${this.base}:idx:sid`;
  }
  labelIndex(agentId: string): string {
    return `${this.base}:idx:label:${agentId}`;
  }
  childrenIndex(parentKey: string): string {
    return `${this.base}:idx:children:${parentKey}`;
  }
  /** Sessions by the instant they go stale (daily/idle): the sweep reads only what is due. */
  staleIndex(): string {
    return `${this.base}:idx:stale`;
  }
}

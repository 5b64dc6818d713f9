/**
 * Redis's clock: what every deployment-wide instant (wakes, owed releases, registrations, process
 * heartbeats) is dated with, so a process whose own clock is off cannot misjudge an age.
 */
import type { RedisClient } from "./redis-client.js";

/** ms since the epoch from Redis TIME. */
export async function redisTimeMs(redis: RedisClient): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

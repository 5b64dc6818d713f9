--[[
  Begin the lease holder's next turn, in one round trip: take it (an unfinished in-flight turn
  first, so per-session order survives crashes, else the oldest queued one), mark its run
  `running` (first start time kept, one more attempt counted) unless it already ended, and
  return with it everything the turn needs: its run record and its session entry.

  The run record's key is built here from the runId, under the same `{prefix}` hash tag as every
  declared key (as BullMQ builds job keys inside its scripts), so the script stays in one slot.
  The runId is read from the start of the turn's JSON (serializeTurn puts it first); a turn
  stored another way is returned without its record and the caller reads it.

  With nothing left to run it releases the lease in the same step (when asked): the drain is
  over, and the next push finds the session idle and wakes a new one.

  KEYS[1] lease, KEYS[2] inbox (list), KEYS[3] inflight (list, at most one item), KEYS[4] session entry
  ARGV[1] token, ARGV[2] run key prefix (`{p}:run:`), ARGV[3] now (ms), ARGV[4] "1": release the lease when empty
  Returns nil when there is nothing to run, else { turn JSON, record field/value list, entry JSON or false },
  or the error "STALE".
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local raw = redis.call("LINDEX", KEYS[3], 0)
if not raw then raw = redis.call("LMOVE", KEYS[2], KEYS[3], "LEFT", "RIGHT") end
if not raw then
  if ARGV[4] == "1" then redis.call("DEL", KEYS[1]) end
  return nil
end

local record = {}
local runId = string.match(raw, '^{"runId":"([^"\\]+)"')
if runId then
  local runKey = ARGV[2] .. runId
  local status = redis.call("HGET", runKey, "status")
  local ended = status == "ok" or status == "error" or status == "timeout" or status == "killed"
  if status and not ended then
    redis.call("HSET", runKey, "status", "running")
    redis.call("HSETNX", runKey, "startedAt", ARGV[3])
    redis.call("HINCRBY", runKey, "attempts", 1)
  end
  record = redis.call("HGETALL", runKey)
end
return { raw, record, redis.call("GET", KEYS[4]) }

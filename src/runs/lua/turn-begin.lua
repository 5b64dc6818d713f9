--[[
  Begin the lease holder's next turn, in one round trip (see begin-next.lua): take it, mark its
  run running, and return it with its run record and session entry.

  With nothing left to run it releases the lease in the same step (when asked): the drain is
  over, and the next push finds the session idle and wakes a new one.

  KEYS[1] lease, KEYS[2] inbox (list), KEYS[3] inflight (list, at most one item), KEYS[4] session entry,
  KEYS[5] pending wakes (zset), KEYS[6] the inbox's byte count (see push-turn.lua)
  ARGV[1] token, ARGV[2] run key prefix (`{p}:run:`), ARGV[3] now (ms), ARGV[4] "1": release the lease when empty,
  ARGV[5] pending-wake member suffix (`|<session key>`),
  ARGV[6] the pending wake this holding keeps (a ready-list drain's), cleared with the lease, or ""
  Returns nil when there is nothing to run, else { turn JSON, record field/value list, entry JSON or false },
  or the error "STALE".
]]
--@include begin-next
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local begun = begin_next(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3], KEYS[5], ARGV[5], KEYS[6])
if not begun and ARGV[4] == "1" then
  redis.call("DEL", KEYS[1])
  if ARGV[6] ~= "" then redis.call("ZREM", KEYS[5], ARGV[6]) end
end
return begun

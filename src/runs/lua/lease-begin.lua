--[[
  The start of a drain job in one round trip: take the session lease if it is free (a new
  fencing token, as lease-acquire.lua), then begin the session's next turn under it (as
  turn-begin.lua, see begin-next.lua). With nothing to run the lease is released again in the
  same step, so an empty drain costs this one script.

  A take sent again (take-lease.lua) answers with the turn the first run began, unchanged: its
  attempt is not counted twice.

  KEYS[1] lease, KEYS[2] fence (counter), KEYS[3] inbox (list), KEYS[4] inflight (list),
  KEYS[5] session entry, KEYS[6] pending wakes (zset), KEYS[7] the lease's take nonce,
  KEYS[8] the inbox's byte count (see push-turn.lua)
  ARGV[1] ttl ms, ARGV[2] run key prefix (`{p}:run:`), ARGV[3] now (ms),
  ARGV[4] pending-wake member suffix (`|<session key>`), or "" to keep the wake (a drain woken
  from the ready list clears its own when it ends, see begin-next.lua),
  ARGV[5] that kept wake, cleared in the same step as the lease is given back, or "",
  ARGV[6] this take's nonce
  Returns {0, pttl} when another holder still has the lease; else {token, begun or false},
  begun as turn-begin returns it (false: nothing to run, and the lease is released already).
]]
--@include begin-next
--@include take-lease
local token, held, again = take_lease(KEYS[1], KEYS[2], ARGV[1], KEYS[7], ARGV[6])
if token == 0 then return {0, held} end
if again then return {token, begun_before(KEYS[4], KEYS[5], ARGV[2]) or false} end
local begun = begin_next(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], KEYS[6], ARGV[4], KEYS[8])
if not begun then
  redis.call("DEL", KEYS[1])
  if ARGV[5] ~= "" then redis.call("ZREM", KEYS[6], ARGV[5]) end
end
return {token, begun or false}

--[[
  Put a session back at the end of the ready list with its pending wake, scored on Redis's clock
  (as push-turn.lua scores wakes): one round trip, and no process clock in the score.

  KEYS[1] pending wakes (zset), KEYS[2] ready list
  ARGV[1] the pending-wake member
  Returns the ready list's new length.
]]
local t = redis.call("TIME")
redis.call("ZADD", KEYS[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[1])
return redis.call("RPUSH", KEYS[2], ARGV[1])

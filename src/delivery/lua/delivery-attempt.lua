--[[
  Record one attempt of a delivery and its outcome: attempts + 1, the status, and the error of a
  failed attempt (a successful one clears it). One script, not a MULTI of four commands.
  KEYS[1] record hash; ARGV[1] status, ARGV[2] error or "" (none). Returns the attempts so far.
]]
local attempts = redis.call("HINCRBY", KEYS[1], "attempts", 1)
redis.call("HSET", KEYS[1], "status", ARGV[1])
if ARGV[2] ~= "" then redis.call("HSET", KEYS[1], "error", ARGV[2]) else redis.call("HDEL", KEYS[1], "error") end
return attempts

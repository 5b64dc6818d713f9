--[[
  Take the session lease if it is free, with a new fencing token.

  KEYS[1] lease  {p}:lease:<session>   (value: the holder's token)
  KEYS[2] fence  {p}:fence:<session>   (monotonic counter)
  ARGV[1] ttl ms

  Returns {token, 0} when acquired, {0, pttl} when another holder still has it.
  A token is only ever used once: a holder that lost its lease can never match again.
]]
local held = redis.call("PTTL", KEYS[1])
if held > 0 or held == -1 then
  return {0, held}
end
local token = redis.call("INCR", KEYS[2])
redis.call("SET", KEYS[1], token, "PX", tonumber(ARGV[1]))
return {token, 0}

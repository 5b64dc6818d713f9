--[[
  Take the session lease if it is free, with a new fencing token.

  KEYS[1] lease  {p}:lease:<session>   (value: the holder's token)
  KEYS[2] fence  {p}:fence:<session>   (monotonic counter)
  ARGV[1] ttl ms

  Returns {token, 0} when acquired, {0, pttl} when another holder still has it.
  A token is only ever used once: a holder that lost its lease can never match again.
]]
--@include take-lease
local token, held = take_lease(KEYS[1], KEYS[2], ARGV[1])
if token == 0 then return {0, held} end
return {token, 0}

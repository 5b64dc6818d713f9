--[[
  Take the session lease if it is free, with a new fencing token (take-lease.lua, which also
  answers a take sent again with the token it got).

  KEYS[1] lease  {p}:lease:<session>   (value: the holder's token)
  KEYS[2] fence  {p}:fence:<session>   (monotonic counter)
  KEYS[3] take   {p}:lease-take:<session>   (the nonce of the last take)
  ARGV[1] ttl ms, ARGV[2] this take's nonce

  Returns {token, 0} when acquired, {0, pttl} when another holder still has it.
  A token is only ever used once: a holder that lost its lease can never match again.
]]
--@include take-lease
local token, held = take_lease(KEYS[1], KEYS[2], ARGV[1], KEYS[3], ARGV[2])
if token == 0 then return {0, held} end
return {token, 0}

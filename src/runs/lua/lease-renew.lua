--[[
  Extend the lease, only for its current holder.
  KEYS[1] lease; ARGV[1] token, ARGV[2] ttl ms. Returns 1 when extended, 0 when lost.
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0

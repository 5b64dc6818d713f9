--[[
  Give the lease back, only for its current holder.
  KEYS[1] lease; ARGV[1] token. Returns 1 when released, 0 when it was not ours any more.
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0

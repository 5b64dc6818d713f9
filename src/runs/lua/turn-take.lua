--[[
  Hand the lease holder its next turn. A turn left in-flight by a crashed holder comes first,
  so it is finished before anything newer (per-session order survives crashes).

  KEYS[1] lease, KEYS[2] inbox (list), KEYS[3] inflight (list, at most one item)
  ARGV[1] token
  Returns the turn JSON, nil when the inbox is empty, or the error "STALE".
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local current = redis.call("LINDEX", KEYS[3], 0)
if current then return current end
return redis.call("LMOVE", KEYS[2], KEYS[3], "LEFT", "RIGHT")

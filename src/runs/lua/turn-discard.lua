--[[
  Take an unreadable turn out of the in-flight slot and keep it as a dead letter, in one step,
  so a corrupt entry can neither block its session nor be lost.

  KEYS[1] lease, KEYS[2] inflight list, KEYS[3] dead-letter hash, KEYS[4] dead-letter index (zset)
  ARGV[1] token, ARGV[2] the exact in-flight entry, ARGV[3] dead letter id, ARGV[4] dead letter JSON,
  ARGV[5] its failedAt (ms), its score in the index
  Returns 1 when discarded, 0 when the slot held something else, or the error "STALE".
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
if redis.call("LINDEX", KEYS[2], 0) ~= ARGV[2] then return 0 end
redis.call("LPOP", KEYS[2])
redis.call("HSET", KEYS[3], ARGV[3], ARGV[4])
redis.call("ZADD", KEYS[4], tonumber(ARGV[5]), ARGV[3])
return 1

--[[
  Heartbeat of a registered process: refresh its record and its expiry, drop expired ones.
  KEYS[1] zset id -> expiry (ms, Redis clock); KEYS[2] hash id -> record JSON.
  ARGV[1] id, ARGV[2] record JSON, ARGV[3] ttl ms. Returns Redis's clock (ms).
]]
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now)
for _, id in ipairs(expired) do redis.call("HDEL", KEYS[2], id) end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local ttl = tonumber(ARGV[3])
redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
redis.call("ZADD", KEYS[1], now + ttl, ARGV[1])
-- The registry outlives no deployment by long: gone 10 TTLs after the last heartbeat. Only ever
-- lengthened here: processes may be configured with different TTLs, and a short one's must not
-- cut a long one's short.
for _, k in ipairs(KEYS) do
  if redis.call("PTTL", k) < ttl * 10 then redis.call("PEXPIRE", k, ttl * 10) end
end
return now

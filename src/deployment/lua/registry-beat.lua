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
redis.call("PEXPIRE", KEYS[1], ttl * 10)
redis.call("PEXPIRE", KEYS[2], ttl * 10)
return now

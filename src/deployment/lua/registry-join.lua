--[[
  Register a process in the Redis-wide process registry, unless its config fingerprint
  conflicts with a live process of the same deployment (same prefix).
  KEYS[1] zset id -> expiry (ms, Redis clock); KEYS[2] hash id -> record JSON.
  ARGV[1] id, ARGV[2] record JSON, ARGV[3] ttl ms, ARGV[4] "1" to join despite a conflict,
  ARGV[5] prefix, ARGV[6] fingerprint hash.
  A conflicting record is a live one with the same prefix, another hash, and not itself forced
  (a process started with --force must not lock out the deployment it was forced into).
  Returns {1, now} when registered, {0, now, conflicting record JSON...} when refused.
]]
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now)
for _, id in ipairs(expired) do redis.call("HDEL", KEYS[2], id) end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)

if ARGV[4] ~= "1" then
  local conflicts = {}
  local all = redis.call("HGETALL", KEYS[2])
  for i = 1, #all, 2 do
    if all[i] ~= ARGV[1] then
      local ok, rec = pcall(cjson.decode, all[i + 1])
      if ok and type(rec) == "table" and rec.prefix == ARGV[5] and rec.forced ~= true
        and type(rec.fingerprint) == "table" and rec.fingerprint.hash ~= ARGV[6] then
        conflicts[#conflicts + 1] = all[i + 1]
      end
    end
  end
  if #conflicts > 0 then
    local out = {0, now}
    for _, c in ipairs(conflicts) do out[#out + 1] = c end
    return out
  end
end

local ttl = tonumber(ARGV[3])
redis.call("HSET", KEYS[2], ARGV[1], ARGV[2])
redis.call("ZADD", KEYS[1], now + ttl, ARGV[1])
-- The registry outlives no deployment by long: gone 10 TTLs after the last heartbeat. Only ever
-- lengthened here: processes may be configured with different TTLs, and a short one's must not
-- cut a long one's short.
for _, k in ipairs(KEYS) do
  if redis.call("PTTL", k) < ttl * 10 then redis.call("PEXPIRE", k, ttl * 10) end
end
return {1, now}

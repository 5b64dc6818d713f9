--[[
  Remove one session entry and all its index memberships.

  KEYS[1] entry, KEYS[2] updated idx, KEYS[3] agent idx, KEYS[4] kind idx, KEYS[5] sid idx,
  KEYS[6] label idx, KEYS[7] stale idx
  ARGV[1] session key
  ARGV[2] children index key prefix "{p}:idx:children:" (same hash tag; the parent is only known
          from the stored entry, so the key is derived here: it is in the same slot by construction)

  Returns the deleted entry JSON, or nil when there was none.
]]
local raw = redis.call("GET", KEYS[1])
if not raw then return nil end
local entry = cjson.decode(raw)
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("ZREM", KEYS[3], ARGV[1])
redis.call("ZREM", KEYS[4], ARGV[1])
redis.call("ZREM", KEYS[7], ARGV[1])
if entry.sessionId and redis.call("HGET", KEYS[5], entry.sessionId) == ARGV[1] then
  redis.call("HDEL", KEYS[5], entry.sessionId)
end
if entry.label and redis.call("HGET", KEYS[6], entry.label) == ARGV[1] then
  redis.call("HDEL", KEYS[6], entry.label)
end
if entry.spawnedBy then
  redis.call("ZREM", ARGV[2] .. entry.spawnedBy, ARGV[1])
end
return raw

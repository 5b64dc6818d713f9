--[[
  Remove one session entry and all its index memberships.

  KEYS[1] entry, KEYS[2] updated idx, KEYS[3] agent idx, KEYS[4] kind idx, KEYS[5] sid idx,
  KEYS[6] label idx, KEYS[7] stale idx, KEYS[8] inbox, KEYS[9] inflight (read only with ARGV[3]),
  KEYS[10] pending archives (written only with ARGV[4])
  ARGV[1] session key
  ARGV[2] children index key prefix "{p}:idx:children:" (same hash tag; the parent is only known
          from the stored entry, so the key is derived here: it is in the same slot by construction)
  ARGV[3] "" (delete whatever the entry holds), or a time (ms): delete only a session idle since
          then at the latest (its updatedAt not after it) with no turn queued or in flight, as the
          prune that picked it by that time saw it; a message since then keeps the session
  ARGV[4] "1": the deleted sessionId is recorded as awaiting its `deleted` archive, in the same
          step as the delete, so a crash before the archive is queued loses nothing
  ARGV[5] now (ms), with ARGV[4]

  Returns the deleted entry JSON, nil when there was none, or "BUSY" when ARGV[3] kept it.
]]
local raw = redis.call("GET", KEYS[1])
if not raw then return nil end
local entry = cjson.decode(raw)
if ARGV[3] ~= "" then
  if (tonumber(entry.updatedAt) or 0) > tonumber(ARGV[3]) then return "BUSY" end
  if redis.call("LLEN", KEYS[8]) > 0 or redis.call("LLEN", KEYS[9]) > 0 then return "BUSY" end
end
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
if ARGV[4] == "1" and entry.sessionId then
  local member = "deleted\n" .. tostring(entry.agentId) .. "\n" .. entry.sessionId .. "\n" .. ARGV[1]
  redis.call("ZADD", KEYS[10], "NX", tonumber(ARGV[5]), member)
end
return raw

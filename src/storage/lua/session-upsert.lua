--[[
  Atomically merge a patch into one session entry and keep every index in step.

  KEYS[1] entry          {p}:s:<key>
  KEYS[2] updated index  {p}:idx:updated        (zset, score updatedAt)
  KEYS[3] agent index    {p}:idx:agent:<agent>  (zset, score updatedAt)
  KEYS[4] kind index     {p}:idx:kind:<kind>    (zset, score updatedAt)
  KEYS[5] sessionId idx  {p}:idx:sid            (hash sessionId -> key)
  KEYS[6] label index    {p}:idx:label:<agent>  (hash label -> key)
  KEYS[7] stale index    {p}:idx:stale          (zset, score staleAt)
  KEYS[8] children idx   {p}:idx:children:<spawnedBy> (a tagged placeholder when there is none:
                         an empty key would hash to another Cluster slot)
  KEYS[9] inbox          {p}:inbox:<key>     (read only with ARGV[10])
  KEYS[10] inflight      {p}:inflight:<key>  (read only with ARGV[10])
  KEYS[11] pending archives {p}:archives:pending (zset, written only with ARGV[12])

  ARGV[1] patch JSON     fields to set; JSON null deletes a field; objects merge one level
  ARGV[2] now (ms)
  ARGV[3] activity       "touch": updatedAt = max(old, patch, now)
                         "preserve": keep the old updatedAt (metadata-only write)
  ARGV[4] staleAt (ms) or "" (never stale) or "keep" (leave the stale index alone)
  ARGV[5] incr JSON      {field: delta} numeric increments applied after the merge, or ""
  ARGV[6] session key (stored in the entry)
  ARGV[7] create mode    "upsert" | "create" (fail if it exists) | "update" (fail if missing)
  ARGV[8] expected sessionId or "": compare-and-set, so two concurrent resets rotate once
  ARGV[9] "1" when the patch sets spawnedBy (KEYS[8] is then the parent's children index)
  ARGV[10] "1": refuse (ERR_BUSY) while the session has queued or in-flight turns
  ARGV[11] expected rev or "": compare-and-set on any change since the caller read the entry
  ARGV[12] "1": a sessionId this write retires is recorded as awaiting its `reset` archive, in
           the same step as the rotation, so a crash before the archive is queued loses nothing

  Returns the new entry JSON, or an error reply:
    "ERR_CONFLICT <current sessionId>", "ERR_BUSY", "ERR_EXISTS", "ERR_MISSING", "ERR_LABEL <holder>",
    "ERR_LINEAGE <field>", "ERR_NO_SESSION_ID"
]]
local oldRaw = redis.call("GET", KEYS[1])
local mode = ARGV[7]
if oldRaw and mode == "create" then return redis.error_reply("ERR_EXISTS") end
if (not oldRaw) and mode == "update" then return redis.error_reply("ERR_MISSING") end

local old = oldRaw and cjson.decode(oldRaw) or {}
if ARGV[8] ~= "" and old.sessionId ~= ARGV[8] then
  return redis.error_reply("ERR_CONFLICT " .. tostring(old.sessionId))
end
if ARGV[11] ~= "" and tostring(old.rev) ~= ARGV[11] then
  return redis.error_reply("ERR_CONFLICT " .. tostring(old.sessionId))
end
if ARGV[10] == "1" and (redis.call("LLEN", KEYS[9]) > 0 or redis.call("LLEN", KEYS[10]) > 0) then
  return redis.error_reply("ERR_BUSY")
end
local patch = cjson.decode(ARGV[1])
local now = tonumber(ARGV[2])
local entry = {}
for k, v in pairs(old) do entry[k] = v end

-- Lineage is written once (OpenClaw makes it immutable too): a child cannot be re-parented.
local lineage = { spawnedBy = true, parentSessionKey = true, spawnDepth = true }
for k, v in pairs(patch) do
  if lineage[k] and old[k] ~= nil and v ~= old[k] then
    return redis.error_reply("ERR_LINEAGE " .. k)
  end
  if v == cjson.null then
    entry[k] = nil
  elseif type(v) == "table" and next(v) ~= nil and #v == 0 then
    -- An object merges one level into the stored one; a null inside it removes that field.
    local merged = {}
    if type(entry[k]) == "table" then
      for ik, iv in pairs(entry[k]) do merged[ik] = iv end
    end
    for ik, iv in pairs(v) do
      if iv == cjson.null then merged[ik] = nil else merged[ik] = iv end
    end
    entry[k] = merged
  else
    entry[k] = v
  end
end

if ARGV[5] ~= "" then
  for k, d in pairs(cjson.decode(ARGV[5])) do
    entry[k] = (tonumber(entry[k]) or 0) + tonumber(d)
  end
end

if not entry.sessionId then return redis.error_reply("ERR_NO_SESSION_ID") end

-- updatedAt only moves forward: a late writer with an older timestamp cannot rewind activity.
local oldUpdated = tonumber(old.updatedAt) or 0
local patchUpdated = tonumber(patch.updatedAt) or 0
if ARGV[3] == "preserve" and oldRaw then
  entry.updatedAt = math.max(oldUpdated, patchUpdated)
else
  entry.updatedAt = math.max(oldUpdated, patchUpdated, now)
end
if not entry.createdAt then entry.createdAt = now end
entry.key = ARGV[6]
entry.rev = (tonumber(old.rev) or 0) + 1

-- Unique label per agent.
if entry.label ~= old.label then
  if entry.label then
    local holder = redis.call("HGET", KEYS[6], entry.label)
    if holder and holder ~= ARGV[6] then return redis.error_reply("ERR_LABEL " .. holder) end
    redis.call("HSET", KEYS[6], entry.label, ARGV[6])
  end
  if old.label then redis.call("HDEL", KEYS[6], old.label) end
end

if entry.sessionId ~= old.sessionId then
  if old.sessionId and redis.call("HGET", KEYS[5], old.sessionId) == ARGV[6] then
    redis.call("HDEL", KEYS[5], old.sessionId)
  end
  redis.call("HSET", KEYS[5], entry.sessionId, ARGV[6])
  if old.sessionId and ARGV[12] == "1" then
    local member = "reset\n" .. tostring(old.agentId or entry.agentId) .. "\n" .. old.sessionId .. "\n" .. ARGV[6]
    redis.call("ZADD", KEYS[11], "NX", now, member)
  end
end

local score = entry.updatedAt
redis.call("ZADD", KEYS[2], score, ARGV[6])
redis.call("ZADD", KEYS[3], score, ARGV[6])
redis.call("ZADD", KEYS[4], score, ARGV[6])

if ARGV[4] == "" then
  redis.call("ZREM", KEYS[7], ARGV[6])
elseif ARGV[4] ~= "keep" then
  redis.call("ZADD", KEYS[7], tonumber(ARGV[4]), ARGV[6])
end

if ARGV[9] == "1" and entry.spawnedBy and not old.spawnedBy then
  redis.call("ZADD", KEYS[8], entry.createdAt, ARGV[6])
end

local out = cjson.encode(entry)
redis.call("SET", KEYS[1], out)
return out

--[[
  A steer: the new run `next` replaces `prev` in the same child session, in one step, only while
  prev still runs. Refused when prev's run record is terminal (it finished: its announce stays
  as it is, even while the registry still says `running` before its announce job ran), when a
  kill suppressed it, or when another steer replaced it. The new registry record names the run
  it replaces (`replaces`), so a re-run of the steering turn can finish a steer cut short.

  KEYS[1] prev registry record, KEYS[2] prev run record, KEYS[3] requester's active runs (set),
  KEYS[4] next registry record, KEYS[5] requester's runs (zset), KEYS[6] child's current run,
  KEYS[7] registered runs (zset runId by registration time on Redis's clock, for the sweep of
  runs never queued)
  ARGV[1] prev runId, ARGV[2] next runId, ARGV[3] next createdAt, ARGV[4] ttl seconds,
  ARGV[5..] next record field, value pairs

  Returns 1 when replaced (also when prev was replaced by this same `next` already: a command
  sent twice), 0 when prev has ended, -1 when prev was killed or replaced by another run, -2 when
  prev has no registry record.
]]
--@include run-status
-- The registry's suppressAnnounce value a kill writes (subagent-suppress.lua), not a run status.
local SUPPRESSED_BY_KILL = "killed"
if redis.call("EXISTS", KEYS[1]) == 0 then return -2 end
local reg = redis.call("HMGET", KEYS[1], "status", "suppressAnnounce", "replacedBy")
if reg[3] == ARGV[2] then return 1 end
if reg[3] or reg[2] == SUPPRESSED_BY_KILL then return -1 end
if (reg[1] and reg[1] ~= "running") or is_terminal(redis.call("HGET", KEYS[2], "status")) then return 0 end
if reg[2] then return -1 end
local ttl = tonumber(ARGV[4])
redis.call("HSET", KEYS[1], "suppressAnnounce", "steer-restart", "replacedBy", ARGV[2])
redis.call("SREM", KEYS[3], ARGV[1])
if redis.call("EXISTS", KEYS[4]) == 0 then
  local fields = {}
  for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
  redis.call("HSET", KEYS[4], unpack(fields))
  redis.call("HSET", KEYS[4], "replaces", ARGV[1])
  redis.call("EXPIRE", KEYS[4], ttl)
end
redis.call("ZADD", KEYS[5], tonumber(ARGV[3]), ARGV[2])
redis.call("EXPIRE", KEYS[5], ttl)
redis.call("SADD", KEYS[3], ARGV[2])
redis.call("EXPIRE", KEYS[3], ttl)
redis.call("SET", KEYS[6], ARGV[2], "EX", ttl)
-- Scored on Redis's clock (the sweep judges the age on it too, whatever the hosts' clocks say);
-- entries older than the records' TTL are gone with their records, so the set stays bounded.
local t = redis.call("TIME")
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[7], "-inf", now_ms - ttl * 1000)
redis.call("ZADD", KEYS[7], now_ms, ARGV[2])
return 1

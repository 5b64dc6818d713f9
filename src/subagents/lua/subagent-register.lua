--[[
  Register a sub-agent run, once per runId, within the requester's active-children limit.

  KEYS[1] run record     {p}:sa:run:<runId>       (hash)
  KEYS[2] requester runs {p}:sa:req:<requester>   (zset runId by createdAt)
  KEYS[3] active runs    {p}:sa:active:<requester> (set of runIds not yet ended)
  KEYS[4] child's run    {p}:sa:child:<childKey>  (string: the child's current runId)
  KEYS[5] the calling run's record {p}:run:<runId> (a key that does not exist for a caller
          outside a turn)
  KEYS[6] registered runs {p}:sa:registered (zset runId by registration time on Redis's clock,
          for the sweep that drops runs whose turn was never queued)
  ARGV[1] runId, ARGV[2] createdAt, ARGV[3] max active children, ARGV[4] ttl seconds,
  ARGV[5..] record field, value pairs

  Returns {1, active} when registered, {0, active} when this runId was registered before
  (a re-run of the spawning turn), {-1, active} when the limit is reached, {-2, active} when the
  calling run was stopped or has ended: a kill's cascade lists the children it finds, so a spawn
  made by the killed run after that listing must not start a child nobody will stop.
]]
--@include run-status
if redis.call("EXISTS", KEYS[1]) == 1 then return {0, redis.call("SCARD", KEYS[3])} end
local active = redis.call("SCARD", KEYS[3])
local caller = redis.call("HMGET", KEYS[5], "status", "cancelRequested")
if caller[2] or is_terminal(caller[1]) then return {-2, active} end
if active >= tonumber(ARGV[3]) then return {-1, active} end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[1], unpack(fields))
redis.call("EXPIRE", KEYS[1], tonumber(ARGV[4]))
redis.call("ZADD", KEYS[2], tonumber(ARGV[2]), ARGV[1])
redis.call("EXPIRE", KEYS[2], tonumber(ARGV[4]))
redis.call("SADD", KEYS[3], ARGV[1])
redis.call("EXPIRE", KEYS[3], tonumber(ARGV[4]))
redis.call("SET", KEYS[4], ARGV[1], "EX", tonumber(ARGV[4]))
-- Scored on Redis's clock (the sweep judges the age on it too, whatever the hosts' clocks say);
-- entries older than the records' TTL are gone with their records, so the set stays bounded.
local t = redis.call("TIME")
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", now_ms - tonumber(ARGV[4]) * 1000)
redis.call("ZADD", KEYS[6], now_ms, ARGV[1])
return {1, active + 1}

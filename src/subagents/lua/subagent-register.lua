--[[
  Register a sub-agent run, once per runId, within the requester's active-children limit.

  KEYS[1] run record     {p}:sa:run:<runId>       (hash)
  KEYS[2] requester runs {p}:sa:req:<requester>   (zset runId by createdAt)
  KEYS[3] active runs    {p}:sa:active:<requester> (set of runIds not yet ended)
  KEYS[4] child's run    {p}:sa:child:<childKey>  (string: the child's current runId)
  ARGV[1] runId, ARGV[2] createdAt, ARGV[3] max active children, ARGV[4] ttl seconds,
  ARGV[5..] record field, value pairs

  Returns {1, active} when registered, {0, active} when this runId was registered before
  (a re-run of the spawning turn), {-1, active} when the limit is reached.
]]
if redis.call("EXISTS", KEYS[1]) == 1 then return {0, redis.call("SCARD", KEYS[3])} end
local active = redis.call("SCARD", KEYS[3])
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
return {1, active + 1}

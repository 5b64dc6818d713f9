--[[
  Queue a turn with its run record, once per runId. A caller that retries with the same runId
  (a retried job, an idempotency key, a webhook redelivery) gets 0 and queues nothing, and the
  existence check is in the same step as the push, so two concurrent retries cannot both push.

  KEYS[1] run hash, KEYS[2] inbox list
  ARGV[1] turn JSON, ARGV[2] record ttl seconds, ARGV[3..] record field, value pairs
  Returns 1 when queued, 0 when the runId already existed.
]]
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[1], unpack(fields))
redis.call("EXPIRE", KEYS[1], tonumber(ARGV[2]))
redis.call("RPUSH", KEYS[2], ARGV[1])
return 1

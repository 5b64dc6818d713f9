--[[
  Queue a turn with its run record, once per runId. A caller that retries with the same runId
  (a retried job, an idempotency key, a webhook redelivery) gets 0 and queues nothing, and the
  existence check is in the same step as the push, so two concurrent retries cannot both push.

  It also says whether the session needs a wake-up (a drain job). A drain job exists for as
  long as the session has a turn queued or in flight (the drainer runs until the inbox is empty,
  chains a follow-up when it yields, and BullMQ re-runs a stalled one). So only a push into an
  idle session (empty inbox, nothing in flight) must add one; a push behind other turns does
  not. The idle case is recorded in the pending-wakes set until the caller has added the drain,
  so a caller that dies in between is covered by the maintenance sweep (docs/design/runs.md).

  KEYS[1] run hash, KEYS[2] inbox list, KEYS[3] inflight list, KEYS[4] pending wakes (zset)
  ARGV[1] turn JSON, ARGV[2] record ttl seconds, ARGV[3] now (ms), ARGV[4] pending-wake member,
  ARGV[5..] record field, value pairs
  Returns 2 when queued into an idle session (add a drain job, then clear the pending wake),
  1 when queued behind other turns (nothing more to do), 0 when the runId already existed.
]]
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[1], unpack(fields))
redis.call("EXPIRE", KEYS[1], tonumber(ARGV[2]))
local idle = redis.call("LLEN", KEYS[2]) == 0 and redis.call("LLEN", KEYS[3]) == 0
redis.call("RPUSH", KEYS[2], ARGV[1])
if idle then
  redis.call("ZADD", KEYS[4], ARGV[3], ARGV[4])
  return 2
end
return 1

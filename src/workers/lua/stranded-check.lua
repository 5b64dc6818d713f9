--[[
  The stranded-session check's step in Redis (src/workers/stranded-sessions.ts): for each session
  of the sessions that may have work (push-turn.lua adds one when a push finds it idle), whether it
  still has any, atomically with what it does about it, so a push racing the check is never lost:
  - nothing queued nor in flight: the session leaves the set (a later push into it is an idle
    push, which adds it again);
  - turns queued or in flight: its time is set to now (Redis's clock), so it is looked at again
    one grace later, and the answer says whether its lease is held (a drainer is on it) or free
    (the caller looks for a drain job or a pending wake, and adds a drain job if there is none).

  KEYS[1] the sessions that may have work (zset), then 3 keys per session: its inbox (list),
  in-flight turn (list) and lease (string)
  ARGV[1], ARGV[2], … the session keys, in the order of their keys
  Returns one code per session: 0 idle (removed), 1 work and lease held, 2 work and lease free.
]]
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local codes = {}
for i = 1, #ARGV do
  local k = 1 + (i - 1) * 3
  if redis.call("LLEN", KEYS[k + 1]) == 0 and redis.call("LLEN", KEYS[k + 2]) == 0 then
    redis.call("ZREM", KEYS[1], ARGV[i])
    codes[i] = 0
  else
    redis.call("ZADD", KEYS[1], now, ARGV[i])
    codes[i] = redis.call("EXISTS", KEYS[k + 3]) == 1 and 1 or 2
  end
end
return codes

--[[
  Finish a turn in one step: terminal run record, in-flight slot freed, waiters notified.
  Doing all three atomically means a crash can never leave a finished run in-flight (it would
  run twice) nor a freed slot with a non-terminal record (a waiter would hang).

  KEYS[1] lease, KEYS[2] run hash, KEYS[3] inflight list
  ARGV[1] token, ARGV[2] runId, ARGV[3] done channel, ARGV[4] record ttl seconds,
  ARGV[5..] field, value pairs (must include status and endedAt)
  Returns 1 when finished now, 0 when the record was already terminal, or the error "STALE".
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local head = redis.call("LINDEX", KEYS[3], 0)
if head then
  local ok, turn = pcall(cjson.decode, head)
  if ok and turn.runId == ARGV[2] then redis.call("LPOP", KEYS[3]) end
end
local status = redis.call("HGET", KEYS[2], "status")
if status == "ok" or status == "error" or status == "timeout" or status == "killed" then
  return 0
end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[2], unpack(fields))
redis.call("EXPIRE", KEYS[2], tonumber(ARGV[4]))
redis.call("PUBLISH", ARGV[3], ARGV[2])
return 1

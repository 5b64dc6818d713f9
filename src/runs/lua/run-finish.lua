--[[
  Finish a turn in one step: terminal run record, in-flight slot freed, waiters notified, and
  (when a turn is given up) its message kept as a dead letter. Doing all of it atomically means
  a crash can never leave a finished run in-flight (it would run twice), a freed slot with a
  non-terminal record (a waiter would hang), nor a given-up message that is not dead-lettered.

  The in-flight turn is recognised by the text `"runId":"<id>"` in its JSON (a plain search;
  inside a JSON string value every quote is escaped, so message text cannot fake it), never by
  decoding it: a decode that fails would keep the turn in-flight and re-run it forever.

  KEYS[1] lease, KEYS[2] run hash, KEYS[3] inflight list, KEYS[4] dead-letter hash
  ARGV[1] token, ARGV[2] runId, ARGV[3] done channel, ARGV[4] record ttl seconds,
  ARGV[5] the turn's runId marker, ARGV[6] dead letter JSON ("" for none),
  ARGV[7] notification: the finished record as JSON, published after the runId and a newline so
  waiters need not read it back ("" publishes the runId alone),
  ARGV[8..] field, value pairs (must include status and endedAt)
  Returns 1 when finished now, 0 when the record was already terminal, or the error "STALE".
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local head = redis.call("LINDEX", KEYS[3], 0)
if head and string.find(head, ARGV[5], 1, true) then
  redis.call("LPOP", KEYS[3])
end
local status = redis.call("HGET", KEYS[2], "status")
if status == "ok" or status == "error" or status == "timeout" or status == "killed" then
  return 0
end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[2], unpack(fields))
redis.call("EXPIRE", KEYS[2], tonumber(ARGV[4]))
if ARGV[6] ~= "" then redis.call("HSET", KEYS[4], ARGV[2], ARGV[6]) end
if ARGV[7] ~= "" then
  redis.call("PUBLISH", ARGV[3], ARGV[2] .. "\n" .. ARGV[7])
else
  redis.call("PUBLISH", ARGV[3], ARGV[2])
end
return 1

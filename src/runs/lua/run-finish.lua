--[[
  Finish a turn in one step: terminal run record, in-flight slot freed, waiters notified, and
  (when a turn is given up) its message kept as a dead letter. Doing all of it atomically means
  a crash can never leave a finished run in-flight (it would run twice), a freed slot with a
  non-terminal record (a waiter would hang), nor a given-up message that is not dead-lettered.
  Optionally it then begins the session's next turn in the same step (begin-next.lua), so a
  busy session costs one round trip per turn between runtimes; with nothing left it can release
  the lease too.

  The in-flight turn is recognised by the text `"runId":"<id>"` in its JSON (a plain search;
  inside a JSON string value every quote is escaped, so message text cannot fake it), never by
  decoding it: a decode that fails would keep the turn in-flight and re-run it forever.

  KEYS[1] lease, KEYS[2] run hash, KEYS[3] inflight list, KEYS[4] dead-letter hash,
  KEYS[5] inbox list, KEYS[6] session entry, KEYS[7] pending wakes (all three only to begin the
  next turn)
  ARGV[1] token, ARGV[2] runId, ARGV[3] done channel, ARGV[4] record ttl seconds,
  ARGV[5] the turn's runId marker, ARGV[6] dead letter JSON ("" for none),
  ARGV[7] notification: the finished record as JSON, published after the runId and a newline so
  waiters need not read it back ("" publishes the runId alone),
  ARGV[8] "1": begin the next turn, ARGV[9] run key prefix, ARGV[10] now (ms),
  ARGV[11] "1": release the lease when there is no next turn,
  ARGV[12] pending-wake member suffix (`|<session key>`, see begin-next.lua),
  ARGV[13..] field, value pairs (must include status and endedAt)
  Returns 1 when finished now, 0 when the record was already terminal — or, when beginning the
  next turn, { that number, the begun turn as turn-begin returns it or false } — or the error "STALE".
]]
--@include run-status
--@include begin-next
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local head = redis.call("LINDEX", KEYS[3], 0)
if head and string.find(head, ARGV[5], 1, true) then
  redis.call("LPOP", KEYS[3])
end
local finished = 0
local status = redis.call("HGET", KEYS[2], "status")
if not is_terminal(status) then
  local fields = {}
  for i = 13, #ARGV do fields[#fields + 1] = ARGV[i] end
  redis.call("HSET", KEYS[2], unpack(fields))
  redis.call("EXPIRE", KEYS[2], tonumber(ARGV[4]))
  if ARGV[6] ~= "" then redis.call("HSET", KEYS[4], ARGV[2], ARGV[6]) end
  if ARGV[7] ~= "" then
    redis.call("PUBLISH", ARGV[3], ARGV[2] .. "\n" .. ARGV[7])
  else
    redis.call("PUBLISH", ARGV[3], ARGV[2])
  end
  finished = 1
end
if ARGV[8] ~= "1" then return finished end
local begun = begin_next(KEYS[5], KEYS[3], KEYS[6], ARGV[9], ARGV[10], KEYS[7], ARGV[12])
if not begun and ARGV[11] == "1" then redis.call("DEL", KEYS[1]) end
return { finished, begun or false }

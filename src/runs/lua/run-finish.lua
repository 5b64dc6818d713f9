--[[
  Finish a turn in one step: terminal run record, in-flight slot freed, waiters notified, and
  (when a turn is given up) its message kept as a dead letter. Doing all of it atomically means
  a crash can never leave a finished run in-flight (it would run twice), a freed slot with a
  non-terminal record (a waiter would hang), nor a given-up message that is not dead-lettered.
  Optionally it then begins the session's next turn in the same step (begin-next.lua), so a
  busy session costs one round trip per turn between runtimes; with nothing left it can release
  the lease too.

  The turns the run's outcome leads to (the next agent-to-agent step) are queued in the same
  step, with their records (push-turn.lua), so a finished run always has its next step queued
  exactly once, whatever crashes: no job is added before the finish and no clean-up after it.
  A push can be conditional on a key existing at the finish (the late flag of a sessions_send
  caller that stopped waiting, set atomically against the run turning terminal). A push into
  this same session comes before the next turn is begun, so the finish can begin it at once.
  The steps were decided on session entries the worker knew (cached); each is checked first,
  and when one changed nothing at all is done and the current entry is returned, so the worker
  decides again on fresh data.

  The in-flight turn is recognised by the runId its JSON starts with (`{"runId":"<id>"`, as
  serializeTurn writes it and begin-next.lua reads it), never by decoding it: a decode that
  fails would keep the turn in-flight and re-run it forever. Only the leading one counts: the
  next turn, which this finish may have begun already (it runs twice when the client sends it
  again after a dropped connection), can name this run too, in its `source.runId` (an announce
  step in the same session), and must stay in flight. A turn not written that way is matched by
  the text `"runId":"<id>"` anywhere (message text cannot fake it: inside a JSON string every
  quote is escaped). RunIds are minted (UUIDs, src/runs/derived-id.ts) and hold nothing JSON
  escapes.

  KEYS[1] lease, KEYS[2] run hash, KEYS[3] inflight list, KEYS[4] dead-letter hash,
  KEYS[5] inbox list, KEYS[6] session entry, KEYS[7] pending wakes, KEYS[8] ready list,
  KEYS[9] the inbox's byte count (see push-turn.lua),
  KEYS[10 .. 9+C] session entries checked, then 5 keys per push: its run hash, inbox, inflight
  list, inbox byte count, and its condition key (any key when it has no condition), then the dead-letter index (zset),
  then the sessions that may have work (zset, see push-turn.lua)
  ARGV[1] token, ARGV[2] runId, ARGV[3] done channel, ARGV[4] record ttl seconds,
  ARGV[5] dead letter JSON ("" for none),
  ARGV[6] "1": begin the next turn, ARGV[7] run key prefix, ARGV[8] now (ms),
  ARGV[9] "1": release the lease when there is no next turn,
  ARGV[10] pending-wake member suffix (`|<session key>`, see begin-next.lua),
  ARGV[11] C: session entries checked, ARGV[12] P: turns pushed,
  ARGV[13] the pending wake this holding keeps (a ready-list drain's), cleared with the lease, or "",
  ARGV[14] the dead letter's failedAt (ms), its score in the index ("" for none),
  then C expected entry JSONs ("": the session must not exist),
  then per push: turn JSON, pending-wake member, flags ("c": conditional, "r": ready the session
  if idle, see push-turn.lua), its record's field, value pairs as a JSON list of strings,
  then the finished record's short field, value pairs as a JSON list of strings (must include
  status and endedAt, and may include `finishedBy`, a nonce new per call: see below), then its
  long ones (a reply, a saved output) as field, value pairs, which need no decoding. Lists, not
  one argument per field: the client pays per argument (docs/design/runs.md).
  The notification is `<runId>\n<the finished record as a JSON list of field, value pairs>`, read
  back here after the write, so waiters need not read it and the client sends the record once.
  `resultOutput` (the runtime output kept for a re-run, possibly large) is left out of it.
  A finish sent twice (the client resends a command whose answer a dropped connection lost)
  finds the record terminal under its own `finishedBy` nonce: it answers as the first run did
  (finished 1, its pushes again, each answering 0 since its runId exists), so the caller still
  does what follows a finish (bookkeeping, wake-ups), which it would skip for a run someone
  else finished. If the first run released the lease (no next turn), the second finds no lease:
  it is not refused as stale then, and begins nothing.
  Returns 1 when finished now, 0 when the record was already terminal; with a next turn asked
  for or any check or push: { that number, the begun turn as turn-begin returns it or false,
  { per push: 3 queued into an idle session and readied, 2 queued into an idle session (add a
  drain job), 1 queued, 0 runId existed, -1 condition not met }
  (empty when not finished now) }; or { -1, index of the entry checked, its current JSON or
  false } when a checked entry changed (nothing done); or the error "STALE".
]]
--@include run-status
--@include begin-next
--@include push-turn
local checks = tonumber(ARGV[11])
local pushes = tonumber(ARGV[12])
local workKey = KEYS[11 + checks + 5 * pushes]
local a = 15 + checks
local pushArgs = {}
for p = 1, pushes do
  local flags = ARGV[a + 2]
  pushArgs[p] = {
    turn = ARGV[a], wake = ARGV[a + 1], fields = cjson.decode(ARGV[a + 3]),
    conditional = string.find(flags, "c", 1, true) ~= nil, ready = string.find(flags, "r", 1, true) ~= nil,
  }
  a = a + 4
end
local finished = 0
local pushed = {}
local fields = cjson.decode(ARGV[a])
for i = a + 1, #ARGV do fields[#fields + 1] = ARGV[i] end
local nonce = false
for i = 1, #fields, 2 do
  if fields[i] == "finishedBy" then nonce = fields[i + 1] end
end
local function push_all()
  for p = 1, pushes do
    local k = 9 + checks + (p - 1) * 5
    local push = pushArgs[p]
    if push.conditional and redis.call("EXISTS", KEYS[k + 5]) == 0 then
      pushed[p] = -1
    else
      pushed[p] = push_turn(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[7], push.turn, ARGV[4],
        push.wake, push.fields, push.ready and KEYS[8], KEYS[k + 4], workKey)
    end
  end
end
-- The dead letter with the outcome its run saved before it was given up (parked on storage after its runtime ran),
-- so a replay writes that outcome instead of running the runtime and its tools again. Only on this rare path. Spliced
-- in before the letter's closing brace: decoding and encoding the letter again could change it (cjson writes [] as {}).
local function with_saved_outcome(letter)
  local r = redis.call("HMGET", KEYS[2], "resultSaved", "resultStatus", "reply", "resultError", "resultAt",
    "resultOutput")
  if r[1] ~= "1" or string.sub(letter, -1) ~= "}" then return letter end
  local saved = { status = r[2] or "ok", at = tonumber(r[5]) or 0 }
  -- Written only with an `ok` outcome (a failed run has no reply), and read only then.
  if r[3] then saved.reply = r[3] end
  if r[4] then saved.error = r[4] end
  if r[6] then saved.output = r[6] end
  return string.sub(letter, 1, -2) .. ',"result":' .. cjson.encode(saved) .. "}"
end
-- Read only where a finish may have run already (not on the common path: one command less).
local function was_resent()
  return nonce and redis.call("HGET", KEYS[2], "finishedBy") == nonce
end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  -- This finish sent again after it released the lease (no next turn then): answered as it was.
  if not was_resent() then return redis.error_reply("STALE") end
  push_all()
  if ARGV[6] ~= "1" and checks == 0 and pushes == 0 then return 1 end
  return { 1, false, pushed }
end
for i = 1, checks do
  local current = redis.call("GET", KEYS[9 + i])
  local expected = ARGV[14 + i]
  if ((expected == "" and current) or (expected ~= "" and current ~= expected)) and not was_resent() then
    return { -1, i, current }
  end
end
local head = redis.call("LINDEX", KEYS[3], 0)
if head then
  local own = turn_run_id(head)
  if own == ARGV[2] or (own == nil and string.find(head, '"runId":"' .. ARGV[2] .. '"', 1, true)) then
    redis.call("LPOP", KEYS[3])
  end
end
local status = redis.call("HGET", KEYS[2], "status")
if not is_terminal(status) then
  redis.call("HSET", KEYS[2], unpack(fields))
  -- When the record became terminal, on Redis's clock: endedAt is the worker's, taken before
  -- the call, and a finish held in a client's queue through a Redis restart lands later.
  local t = redis.call("TIME")
  redis.call("HSET", KEYS[2], "terminalAt", tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call("EXPIRE", KEYS[2], tonumber(ARGV[4]))
  if ARGV[5] ~= "" then
    redis.call("HSET", KEYS[4], ARGV[2], with_saved_outcome(ARGV[5]))
    redis.call("ZADD", KEYS[10 + checks + 5 * pushes], tonumber(ARGV[14]), ARGV[2])
  end
  local record = redis.call("HGETALL", KEYS[2])
  local published = {}
  for i = 1, #record, 2 do
    if record[i] ~= "resultOutput" and record[i] ~= "finishedBy" then
      published[#published + 1] = record[i]
      published[#published + 1] = record[i + 1]
    end
  end
  redis.call("PUBLISH", ARGV[3], ARGV[2] .. "\n" .. cjson.encode(published))
  finished = 1
  push_all()
elseif was_resent() then
  finished = 1 -- this very finish, sent again (see above)
  push_all()
end
if ARGV[6] ~= "1" and checks == 0 and pushes == 0 then return finished end
local begun = false
if ARGV[6] == "1" then
  begun = begin_next(KEYS[5], KEYS[3], KEYS[6], ARGV[7], ARGV[8], KEYS[7], ARGV[10], KEYS[9]) or false
  if not begun and ARGV[9] == "1" then
    redis.call("DEL", KEYS[1])
    if ARGV[13] ~= "" then redis.call("ZREM", KEYS[7], ARGV[13]) end
  end
end
return { finished, begun, pushed }

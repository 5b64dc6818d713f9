--[[
  /stop's drop of a session's queued turns, one bounded step per call, so that no call holds
  Redis for long whatever the inbox holds (one call that read and copied 300 MB of queued turns
  stalled every session for 3 s). Each dropped turn's run record is made `killed` (unless it is
  terminal already; a record that does not exist is not created) and its waiters told, and the
  turn is kept in the stopped-turns hash until the caller has queued what it still carries (its
  continuation, the archive of a reset). A caller that dies before that leaves the entry, which
  the maintenance sweep picks up (src/runs/stop.ts), so no dropped turn loses its announce or
  agent-to-agent step.

  A whole stop (ARGV[5] ""): its first call (ARGV[6] "1") cuts: the inbox is renamed to the
  stop's own list (O(1)) and its byte count deleted, so the stop drops exactly the turns queued at
  that instant: none of them can begin while it goes on, and a turn pushed after it goes into a
  new inbox and runs as usual. Then each call (the first too) pops at most ARGV[7] turns, and
  past the first at most ARGV[8] bytes, from the stop's list. While that list holds turns the stop
  is in the stops index, scored with its last call's time, so a stop that dies between calls is
  finished by the maintenance sweep once it has made no progress for a minute. A cut sent twice
  (ioredis resends a command a dropped connection left unanswered) must take nothing: by then the
  first cut may have emptied and deleted its list and new turns filled a new inbox, which a second
  rename would take and kill. So the cut records itself in KEYS[6], in the same step, for ARGV[10]
  ms (far longer than any resend can come late), and a cut that finds that record renames nothing
  and only goes on popping. RENAMENX stays for a record expired while the list still holds turns.

  One run (ARGV[5] its runId; a steer stops the run it replaces, not the turns queued behind it):
  the inbox is read from index ARGV[9], at most ARGV[7] turns and past the first ARGV[8] bytes per
  call, and that run's turn is removed (off the byte count) with the same bookkeeping; every other
  turn stays queued in its order.

  KEYS[1] inbox list (a whole stop's first call: renamed; one run: searched), KEYS[2] stopped-turns
  hash (runId -> "<ms>\n<turn JSON>"), KEYS[3] the stop's own list (a whole stop), KEYS[4] stops
  index (zset stop id -> ms), KEYS[5] the inbox's byte count (see push-turn.lua), KEYS[6] the
  stop's cut record (a whole stop; see above)
  ARGV[1] run key prefix (`{p}:run:`), ARGV[2] run-done channel, ARGV[3] error, ARGV[4] now (ms),
  ARGV[5] the one runId to drop, or "" (a whole stop), ARGV[6] "1": cut first (a whole stop's
  first call), ARGV[7] most turns per call, ARGV[8] most bytes per call,
  ARGV[9] a whole stop: its id (its member in the stops index); one run: the index to read from,
  ARGV[10] a whole stop's cut: how long its record is kept (ms)
  Returns { more, the dropped turns (their JSON, oldest first) }: a whole stop's `more` is 1 when
  its list still holds turns (call again, without the cut), 0 when it is done; one run's is the
  index to read on from, or -1 when done (its turn dropped, or the inbox read to its end).
]]
--@include run-status
local RUN_ID = '^{"runId":"([^"\\]+)"'
local maxTurns, maxBytes = tonumber(ARGV[7]), tonumber(ARGV[8])
local dropped = {}

-- Drop the turn `raw` (already out of its list). The runId leads the turn's JSON (serializeTurn);
-- a turn without one is dropped as unreadable.
local function drop(raw)
  dropped[#dropped + 1] = raw
  local runId = string.match(raw, RUN_ID)
  if not runId then return end
  local runKey = ARGV[1] .. runId
  if redis.call("EXISTS", runKey) == 1 and not is_terminal(redis.call("HGET", runKey, "status")) then
    redis.call("HSET", runKey, "status", "killed", "error", ARGV[3], "endedAt", ARGV[4])
    redis.call("PUBLISH", ARGV[2], runId)
  end
  redis.call("HSET", KEYS[2], runId, ARGV[4] .. "\n" .. raw)
end

if ARGV[5] ~= "" then
  -- LINDEX one at a time rather than LRANGE: the bytes copied stay bounded whatever each turn holds.
  local at, read, bytes = tonumber(ARGV[9]), 0, 0
  while read < maxTurns and (read == 0 or bytes < maxBytes) do
    local raw = redis.call("LINDEX", KEYS[1], at)
    if not raw then return { -1, dropped } end
    if string.match(raw, RUN_ID) == ARGV[5] then
      redis.call("LREM", KEYS[1], 1, raw)
      if redis.call("DECRBY", KEYS[5], #raw) <= 0 then redis.call("DEL", KEYS[5]) end
      drop(raw)
      return { -1, dropped }
    end
    at, read, bytes = at + 1, read + 1, bytes + #raw
  end
  return { at, dropped }
end

-- SET NX: recorded even when the inbox is empty, so a resent cut never takes turns pushed since.
if ARGV[6] == "1" and redis.call("SET", KEYS[6], ARGV[4], "NX", "PX", tonumber(ARGV[10])) then
  if redis.call("EXISTS", KEYS[1]) == 1 and redis.call("RENAMENX", KEYS[1], KEYS[3]) == 1 then
    redis.call("DEL", KEYS[5])
  end
end
local bytes = 0
while #dropped < maxTurns and (#dropped == 0 or bytes < maxBytes) do
  local raw = redis.call("LPOP", KEYS[3])
  if not raw then break end
  bytes = bytes + #raw
  drop(raw)
end
if redis.call("EXISTS", KEYS[3]) == 0 then
  redis.call("ZREM", KEYS[4], ARGV[9])
  return { 0, dropped }
end
redis.call("ZADD", KEYS[4], tonumber(ARGV[4]), ARGV[9])
return { 1, dropped }

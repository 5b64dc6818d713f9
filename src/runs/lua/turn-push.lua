--[[
  Queue a turn with its run record, once per runId. A caller that retries with the same runId
  (a retried job, an idempotency key, a webhook redelivery) gets 0 and queues nothing, and the
  existence check is in the same step as the push, so two concurrent retries cannot both push.

  It also says whether the session needs a wake-up (a drain job). A drain job exists for as
  long as the session has a turn queued or in flight (the drainer runs until the inbox is empty,
  chains a follow-up when it yields, and BullMQ re-runs a stalled one). So only a push into an
  idle session (empty inbox, nothing in flight) must add one; a push behind other turns does
  not. The idle case is recorded in the pending-wakes set until a drainer takes the turn
  (begin-next.lua clears it), so a caller that dies before adding the drain is covered by the
  maintenance sweep (docs/design/runs.md).

  Optionally the push is conditional on the session entry the caller built the turn from (a
  gateway's cached copy): if the stored entry is not exactly that text any more, nothing is
  queued and the current entry is returned, so the caller decides again on fresh data. A read
  and a push in one round trip, with no window between them.

  And optionally on the session still being the turn's sessionId: a reset (on any gateway)
  between the caller's read and this push retired that sessionId, whose transcript may be
  archived already; a turn pushed now must not run in it. The entry is returned as above. A
  session with no entry is refused too ({ -1, false }): deleted meanwhile (sessions.delete,
  pruning, a sub-agent's clean-up), its transcript archived as deleted or about to be, so the
  turn would write a live transcript no entry names and nothing archives or prunes again.

  And optionally on the inbox holding fewer than a limit of turns (gateway.limits.maxQueuedTurns),
  and on this turn not taking the bytes of a non-empty inbox past a limit
  (gateway.limits.maxQueuedBytes; the inbox's byte count, see push-turn.lua): a turn from a door
  into a full inbox is refused, nothing queued. Internal pushes (continuations, announce and
  agent-to-agent steps, replays) pass 0 and are never refused. The runId check comes first, so a
  push sent again for a turn already queued answers 0 as before, never "full".

  KEYS[1] run hash, KEYS[2] inbox list, KEYS[3] inflight list, KEYS[4] pending wakes (zset),
  KEYS[5] session entry (read only with ARGV[4]), KEYS[6] ready list (used only with ARGV[5]),
  KEYS[7] the inbox's byte count (string), KEYS[8] the sessions that may have work (zset, see push-turn.lua)
  ARGV[1] turn JSON, ARGV[2] record ttl seconds, ARGV[3] pending-wake member,
  ARGV[4] the entry JSON the turn was built from, or "" (no check),
  ARGV[5] "1": ready an idle session on the ready list instead of asking for a drain job,
  ARGV[6] the sessionId the session must still have, or "" (no check),
  ARGV[7] the most turns the inbox may already hold for this push to be queued, or 0 (no check),
  ARGV[8] the most bytes a non-empty inbox may hold with this turn, or 0 (no check),
  ARGV[9] the record's field, value pairs as a JSON list of strings
  Returns 3 when queued into an idle session and readied (nothing more to do), 2 when queued into
  an idle session (add a drain job), 1 when queued behind other
  turns (nothing more to do), 0 when the runId already existed, { -1, current entry JSON or
  false } when the entry changed (nothing queued), { -2, inbox length } when the inbox
  already held ARGV[7] turns or more, or { -3, inbox length, inbox bytes } when this turn would
  take them past ARGV[8] (nothing queued).
]]
--@include push-turn
-- A runId that exists was pushed already (a retry, or this very push sent again by the client
-- after a dropped connection): say so before the entry check, which the first push may have
-- outdated (a turn finishing meanwhile updates the entry), or the caller would push it again.
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
-- A door's push into a full inbox is refused (O(1)); internal pushes send 0 and always queue.
local limit, byteLimit, queued = tonumber(ARGV[7]), tonumber(ARGV[8]), nil
if limit > 0 or byteLimit > 0 then
  queued = redis.call("LLEN", KEYS[2])
  if limit > 0 and queued >= limit then return { -2, queued } end
  -- Into an empty inbox a turn is always queued: one larger than the limit could otherwise never be.
  if byteLimit > 0 and queued > 0 then
    local bytes = tonumber(redis.call("GET", KEYS[7]) or 0)
    if bytes + #ARGV[1] > byteLimit then return { -3, queued, bytes } end
  end
end
if ARGV[4] ~= "" then
  local entry = redis.call("GET", KEYS[5])
  if entry ~= ARGV[4] then return { -1, entry } end
elseif ARGV[6] ~= "" then
  -- Entries are written by cjson (session-upsert.lua) and no nested field is named sessionId,
  -- so the encoded pair occurs only as the entry's own field (a quote inside a string value is
  -- escaped, so no text can imitate it).
  local entry = redis.call("GET", KEYS[5])
  if not entry then return { -1, false } end
  if not string.find(entry, '"sessionId":' .. cjson.encode(ARGV[6]), 1, true) then return { -1, entry } end
end
local fields = cjson.decode(ARGV[9])
-- The inbox length read for the limits is still right: nothing was written since.
return queue_new_turn(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], fields, ARGV[5] == "1" and KEYS[6],
  KEYS[7], KEYS[8], queued)

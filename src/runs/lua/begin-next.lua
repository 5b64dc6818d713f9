--[[
  Shared by lease-begin.lua, turn-begin.lua and run-finish.lua
  (included with --@include; not a script itself).

  begun_before(inflight, session, runPrefix): the turn begun already (the in-flight one), as
  begin_next returned it, changing nothing; nil when none (see lease-begin.lua).

  begin_next(inbox, inflight, session, runPrefix, now, wakes, wakeSuffix, inboxBytes): take the
  next turn (the in-flight one first, so per-session order survives crashes, else the oldest
  queued), mark its run `running` (first start time kept, one more attempt counted) unless it
  already ended, and return { turn JSON, record field/value list, session entry JSON or false },
  or nil. A turn taken from the inbox comes off the inbox's byte count (see push-turn.lua), which
  is deleted when it reaches 0: an in-flight turn, and so its re-run after a crash, counts no more.

  A turn taken from the inbox also clears its pending wake (`<runId><wakeSuffix>` in the
  pending-wakes zset, see turn-push.lua): a drainer has reached it, so the wake it stood for
  happened. This is what makes the pusher's own clean-up unnecessary. A drain woken from the
  ready list passes "" as `wakeSuffix`: its wake stays until the drain ends (and clears it), so a
  worker killed mid-drain leaves it for the overdue-wake check (src/workers/ready-consumer.ts).

  The run record's key is built from the runId, under the same `{prefix}` hash tag as every
  declared key (as BullMQ builds job keys inside its scripts), so the script stays in one slot.
  The runId is read from the start of the turn's JSON (serializeTurn puts it first); a turn
  stored another way is returned without its record and the caller reads it.
]]
--@include run-status
-- The runId at the start of a turn's JSON (serializeTurn puts it first), or nil.
local function turn_run_id(raw)
  return string.match(raw, '^{"runId":"([^"\\]+)"')
end

-- What begin_next and begun_before answer for the turn `raw`.
local function begun_reply(raw, runId, runPrefix, sessionKey)
  local record = runId and redis.call("HGETALL", runPrefix .. runId) or {}
  return { raw, record, redis.call("GET", sessionKey) }
end

local function begun_before(inflightKey, sessionKey, runPrefix)
  local raw = redis.call("LINDEX", inflightKey, 0)
  if not raw then return nil end
  return begun_reply(raw, turn_run_id(raw), runPrefix, sessionKey)
end

local function begin_next(inboxKey, inflightKey, sessionKey, runPrefix, now, wakesKey, wakeSuffix, bytesKey)
  local raw = redis.call("LINDEX", inflightKey, 0)
  local fromInbox = false
  if not raw then
    raw = redis.call("LMOVE", inboxKey, inflightKey, "LEFT", "RIGHT")
    if not raw then return nil end
    fromInbox = true
    -- At or below 0 the inbox is empty (or held turns pushed without a count): nothing to keep.
    if redis.call("DECRBY", bytesKey, #raw) <= 0 then redis.call("DEL", bytesKey) end
  end
  local runId = turn_run_id(raw)
  if runId then
    if fromInbox and wakeSuffix ~= "" then redis.call("ZREM", wakesKey, runId .. wakeSuffix) end
    local runKey = runPrefix .. runId
    local status = redis.call("HGET", runKey, "status")
    if status and not is_terminal(status) then
      redis.call("HSET", runKey, "status", "running")
      redis.call("HSETNX", runKey, "startedAt", now)
      redis.call("HINCRBY", runKey, "attempts", 1)
    end
  end
  return begun_reply(raw, runId, runPrefix, sessionKey)
end

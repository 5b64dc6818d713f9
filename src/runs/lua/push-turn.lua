--[[
  Shared by turn-push.lua and run-finish.lua (included with --@include; not a script itself).

  push_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey, bytesKey, workKey):
  queue a turn with its run record (status queued), once per runId. Returns 0 when the runId
  already existed (nothing queued), 1 when queued behind other turns (the session's drain job
  exists and reaches it), 2 when queued into an idle session (empty inbox, nothing in flight):
  then a drain job must be added, and `wakeMember` is recorded in the pending-wakes zset until
  a drainer takes the turn (begin-next.lua), so a caller that dies before adding it is covered
  by the maintenance sweep. Its score is the time on Redis's clock, never a process's: the
  overdue check compares it with Redis's clock too, so a process whose clock runs ahead cannot
  hide a wake from it (docs/design/runs.md).

  With `readyKey` (a list; false for none) an idle session is also readied: `wakeMember` goes to
  the back of the ready list, which workers pop as the wake-up itself (src/workers/ready-consumer.ts),
  so no drain job is needed: it returns 3 then.

  `bytesKey` (a string) holds the UTF-8 bytes of the turns in the inbox (gateway.limits.maxQueuedBytes):
  a push adds its turn's, and a push into an empty inbox sets it to its turn's, so a count that
  went wrong (an inbox changed by hand, turns queued by an older release) is right again once the
  inbox has emptied. begin-next.lua and stop-queued.lua take off what they take out.

  `workKey` (a zset) holds the sessions that may have work (member: the session key, taken from
  `wakeMember`, score: ms on Redis's clock). An idle push adds its session; nothing on the hot path
  removes it: the maintenance sweep's stranded-session check (stranded-check.lua) drops a session
  found with nothing queued or in flight, and re-arms one with turns and no drainer (its drain job
  removed by an operator), so the wake-ups above are not the only way a session's turns get run.

  queue_new_turn(same arguments, then the inbox length if the caller read it already): push_turn
  without the existence check, for a caller that made it already (turn-push.lua checks it before
  its entry check).
]]
-- push_turn for a runId known not to exist yet (the caller checked, e.g. turn-push.lua).
local function queue_new_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey,
                              bytesKey, workKey, queued)
  redis.call("HSET", runKey, unpack(fields))
  redis.call("EXPIRE", runKey, tonumber(ttl))
  queued = queued or redis.call("LLEN", inboxKey)
  local idle = queued == 0 and redis.call("LLEN", inflightKey) == 0
  redis.call("RPUSH", inboxKey, turnJson)
  if queued == 0 then
    redis.call("SET", bytesKey, #turnJson)
  else
    redis.call("INCRBY", bytesKey, #turnJson)
  end
  if idle then
    local t = redis.call("TIME")
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call("ZADD", wakesKey, now, wakeMember)
    -- The member is `<runId>|<sessionKey>` and runIds hold no `|` (src/runs/pending-wakes.ts).
    redis.call("ZADD", workKey, now, string.sub(wakeMember, string.find(wakeMember, "|", 1, true) + 1))
    if readyKey then
      redis.call("RPUSH", readyKey, wakeMember)
      return 3
    end
    return 2
  end
  return 1
end

local function push_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey, bytesKey,
                         workKey)
  if redis.call("EXISTS", runKey) == 1 then return 0 end
  return queue_new_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey, bytesKey,
    workKey)
end

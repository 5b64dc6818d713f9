--[[
  Shared by turn-push.lua and run-finish.lua (included with --@include; not a script itself).

  push_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey, bytesKey):
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

  queue_new_turn(same arguments, then the inbox length if the caller read it already): push_turn
  without the existence check, for a caller that made it already (turn-push.lua checks it before
  its entry check).
]]
-- push_turn for a runId known not to exist yet (the caller checked, e.g. turn-push.lua).
local function queue_new_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey,
                              bytesKey, queued)
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
    redis.call("ZADD", wakesKey, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), wakeMember)
    if readyKey then
      redis.call("RPUSH", readyKey, wakeMember)
      return 3
    end
    return 2
  end
  return 1
end

local function push_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey, bytesKey)
  if redis.call("EXISTS", runKey) == 1 then return 0 end
  return queue_new_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey, bytesKey)
end

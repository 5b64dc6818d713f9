--[[
  Shared by turn-push.lua and run-finish.lua (included with --@include; not a script itself).

  push_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey):
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

  queue_new_turn(same arguments): push_turn without the existence check, for a caller that made
  it already (turn-push.lua checks it before its entry check).
]]
-- push_turn for a runId known not to exist yet (the caller checked, e.g. turn-push.lua).
local function queue_new_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey)
  redis.call("HSET", runKey, unpack(fields))
  redis.call("EXPIRE", runKey, tonumber(ttl))
  local idle = redis.call("LLEN", inboxKey) == 0 and redis.call("LLEN", inflightKey) == 0
  redis.call("RPUSH", inboxKey, turnJson)
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

local function push_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey)
  if redis.call("EXISTS", runKey) == 1 then return 0 end
  return queue_new_turn(runKey, inboxKey, inflightKey, wakesKey, turnJson, ttl, wakeMember, fields, readyKey)
end

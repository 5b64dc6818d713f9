--[[
  /stop's drop of a session's queued turns, in one step: the inbox emptied, each turn's run
  record made `killed` (unless it is terminal already; a record that does not exist is not
  created) and its waiters told, and each dropped turn kept in the stopped-turns hash until
  the caller has queued what it still carries (its continuation, the archive of a reset). A
  caller that dies before that leaves the entry, which the maintenance sweep picks up
  (src/runs/stop.ts), so no dropped turn loses its announce or agent-to-agent step.

  KEYS[1] inbox list, KEYS[2] stopped-turns hash (runId -> "<ms>\n<turn JSON>")
  ARGV[1] run key prefix (`{p}:run:`), ARGV[2] run-done channel, ARGV[3] error, ARGV[4] now (ms)
  Returns the dropped turns (their JSON, oldest first).
]]
--@include run-status
local turns = redis.call("LRANGE", KEYS[1], 0, -1)
redis.call("DEL", KEYS[1])
for _, raw in ipairs(turns) do
  -- The runId leads the turn's JSON (serializeTurn); a turn without one is dropped as unreadable.
  local runId = string.match(raw, '^{"runId":"([^"\\]+)"')
  if runId then
    local runKey = ARGV[1] .. runId
    if redis.call("EXISTS", runKey) == 1 and not is_terminal(redis.call("HGET", runKey, "status")) then
      redis.call("HSET", runKey, "status", "killed", "error", ARGV[3], "endedAt", ARGV[4])
      redis.call("PUBLISH", ARGV[2], runId)
    end
    redis.call("HSET", KEYS[2], runId, ARGV[4] .. "\n" .. raw)
  end
end
return turns

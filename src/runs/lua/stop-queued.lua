--[[
  /stop's drop of a session's queued turns, in one step: the inbox emptied, each turn's run
  record made `killed` (unless it is terminal already; a record that does not exist is not
  created) and its waiters told, and each dropped turn kept in the stopped-turns hash until
  the caller has queued what it still carries (its continuation, the archive of a reset). A
  caller that dies before that leaves the entry, which the maintenance sweep picks up
  (src/runs/stop.ts), so no dropped turn loses its announce or agent-to-agent step.

  With ARGV[5] (a runId), only that run's queued turn is dropped and the others stay queued in
  their order (a steer stops the run it replaces, not the turns queued behind it).

  KEYS[1] inbox list, KEYS[2] stopped-turns hash (runId -> "<ms>\n<turn JSON>")
  ARGV[1] run key prefix (`{p}:run:`), ARGV[2] run-done channel, ARGV[3] error, ARGV[4] now (ms),
  ARGV[5] optional: the one runId to drop ("" or absent: every queued turn)
  Returns the dropped turns (their JSON, oldest first).
]]
--@include run-status
local only = ARGV[5] or ""
local queued = redis.call("LRANGE", KEYS[1], 0, -1)
local turns = {}
if only == "" then
  turns = queued
  redis.call("DEL", KEYS[1])
else
  for _, raw in ipairs(queued) do
    if string.match(raw, '^{"runId":"([^"\\]+)"') == only then
      redis.call("LREM", KEYS[1], 1, raw)
      turns[#turns + 1] = raw
    end
  end
end
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

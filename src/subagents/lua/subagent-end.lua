--[[
  A sub-agent run has ended (its announce job, src/subagents/announce.ts): its registry record
  takes the outcome and it stops counting against its requester's active runs. When the
  requester is itself a sub-agent (an orchestrator whose report waits for what it spawned), the
  same step marks the completion this run still owes it, so that no claim of the requester's
  report (subagent-claim.lua) ever finds the run neither active nor owed, whatever crashes between
  this step and the completion turn's push. Marked only by the step that takes the run out of the
  active set: a retried announce marks nothing again, so a mark the completion's claim has already
  cleared is never written back (a run a kill or steer took out of the set owes no completion).

  KEYS[1] the run's registry record, KEYS[2] its requester's active runs (set),
  KEYS[3] its requester's pending completions (set of completion runIds)
  ARGV[1] runId, ARGV[2] status, ARGV[3] endedAt (ms), ARGV[4] error or "",
  ARGV[5] the completion's member of KEYS[3] ("": none, a top-level requester), ARGV[6] ttl seconds
  Returns 1 when this step took the run out of the active set, 0 when it was out already.
]]
redis.call("HSET", KEYS[1], "status", ARGV[2], "endedAt", ARGV[3])
if ARGV[4] ~= "" then redis.call("HSET", KEYS[1], "error", ARGV[4]) end
local removed = redis.call("SREM", KEYS[2], ARGV[1])
if removed == 1 and ARGV[5] ~= "" then
  redis.call("SADD", KEYS[3], ARGV[5])
  redis.call("EXPIRE", KEYS[3], tonumber(ARGV[6]))
end
return removed

--[[
  A kill's suppression of a sub-agent run's announce, refused when the run has ended (unless its
  report still waits for its own sub-agents, subagent-claim.lua): a run that
  finished before the kill keeps its announce (its result is not thrown away), even while the
  registry still says `running` because its announce job has not run yet. The announce job
  reads the registry only after the run record is terminal, so a suppression this script allows
  (record not terminal yet) is always seen by it. A report that waited is refused too once a
  claim has won it (`announceClaim`): it is being announced (the record says `deferred` until
  the announce job ends), and the claim script refuses a suppressed report likewise, so a kill
  and a claim never both win.

  KEYS[1] registry record {p}:sa:run:<runId>, KEYS[2] run record {p}:run:<runId>
  ARGV[1] reason ("killed")

  Returns 1 when suppressed (also when it already was, for that reason: a command sent twice),
  0 when the run has ended (nothing changed), -1 when a steer replaced the run, -2 when there is
  no registry record.
]]
--@include run-status
if redis.call("EXISTS", KEYS[1]) == 0 then return -2 end
local reg = redis.call("HMGET", KEYS[1], "status", "suppressAnnounce", "replacedBy", "announce", "announceClaim")
if reg[3] then return -1 end
if reg[2] == ARGV[1] then return 1 end
-- A claim has won its report: the run has ended, and its report is being announced.
if reg[5] then return 0 end
-- An orchestrator whose run ended but whose report waits for its sub-agents is still active.
local waiting = reg[4] == "deferred"
if (not waiting) and ((reg[1] and reg[1] ~= "running") or is_terminal(redis.call("HGET", KEYS[2], "status"))) then
  return 0
end
if reg[2] then return -1 end
redis.call("HSET", KEYS[1], "suppressAnnounce", ARGV[1])
return 1

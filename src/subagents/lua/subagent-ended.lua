--[[
  A sub-agent run has ended (its announce job): record the outcome and stop counting it among
  its requester's active runs. If that requester is itself a sub-agent session whose own run was
  deferred waiting for its sub-agents (subagent-defer.lua) and this was the last of them, that
  run is claimed for waking (`announce` deferred -> waking) and its runId returned: the caller
  hands it the requester's next turn (or queues its announce), exactly once.

  KEYS[1] the run's registry record, KEYS[2] the requester's active runs,
  KEYS[3] the requester session's current run (a child session's `sa:child` key; a placeholder
  under the same tag for a top-level requester, which has none)
  ARGV[1] registry record key prefix ("{p}:sa:run:": the woken run's record is built from it, in
  the same slot), ARGV[2] the run's runId, ARGV[3..] outcome field, value pairs
  Returns the runId of the run to wake, or false.
]]
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[1], unpack(fields))
redis.call("SREM", KEYS[2], ARGV[2])
if redis.call("SCARD", KEYS[2]) > 0 then return false end
local parentRun = redis.call("GET", KEYS[3])
if not parentRun then return false end
local parentRecord = ARGV[1] .. parentRun
if redis.call("HGET", parentRecord, "announce") ~= "deferred" then return false end
redis.call("HSET", parentRecord, "announce", "waking")
return parentRun

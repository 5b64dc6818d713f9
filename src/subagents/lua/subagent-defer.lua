--[[
  An orchestrator's announce waits for its own sub-agents: a run whose child session still has
  runs of its own not yet announced (its active set) is marked `deferred` instead of being
  announced. The last of those to be announced wakes it (subagent-ended.lua). Checked and marked
  in one step with that wake, so the last descendant cannot settle between the two.

  KEYS[1] the run's registry record, KEYS[2] the child session's active runs (its own children)
  ARGV[1] the announce state to record ("deferred")
  Returns 1 when deferred, 0 when nothing is pending (announce now).
]]
if redis.call("SCARD", KEYS[2]) == 0 then return 0 end
redis.call("HSET", KEYS[1], "announce", ARGV[1])
return 1

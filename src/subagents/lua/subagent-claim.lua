--[[
  Who announces a sub-agent run: its own announce job, or the announce carried by a completion
  turn of one of its own sub-agents in its session (an orchestrator reports after them). The
  run is claimed once, by the first of them to find nothing of its own still pending: no run it
  spawned still to be announced (its child session's active set) and no completion turn waiting
  in its session (queued or in flight; each of those carries a claim of its own). Until then it
  is marked `deferred`. The claimer is named, so the same job retried claims again.

  KEYS[1] the run's registry record, KEYS[2] its child session's active runs (what it spawned),
  KEYS[3] that session's inbox, KEYS[4] its in-flight list
  ARGV[1] the claimer (the runId whose outcome would be announced)
  Returns 1 when claimed (announce now), 0 when deferred, -1 when another claimed it already.
]]
local claimer = redis.call("HGET", KEYS[1], "announceClaim")
if claimer then return claimer == ARGV[1] and 1 or -1 end
local pending = redis.call("SCARD", KEYS[2]) > 0
if not pending then
  local waiting = redis.call("LRANGE", KEYS[3], 0, -1)
  local inflight = redis.call("LINDEX", KEYS[4], 0)
  if inflight then waiting[#waiting + 1] = inflight end
  for _, raw in ipairs(waiting) do
    if string.find(raw, '"tool":"subagent_announce"', 1, true) then
      pending = true
      break
    end
  end
end
if pending then
  redis.call("HSET", KEYS[1], "announce", "deferred")
  return 0
end
redis.call("HSET", KEYS[1], "announceClaim", ARGV[1])
return 1

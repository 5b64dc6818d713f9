--[[
  Who announces a sub-agent run, and on which outcome: its own announce job, or the announce
  carried by a completion turn of one of its own sub-agents in its session (an orchestrator
  reports after them). Each claimer is a turn of the run's session that has ended; a completion
  turn's claim first settles the completion it was (KEYS[5], marked by subagent-end.lua when its
  sub-agent ended). The run is claimed once, by the first claim to find nothing of its own still
  pending: no run it spawned still active, no completion owed to it still unsettled, and no
  completion turn waiting in its session (queued or in flight: turns a previous release queued
  carry no mark). Until then it is marked `deferred`.

  The report is on the newest outcome among every claimer so far (`claim:<runId>` fields, each
  with its order key), not only the winner's: the last sub-agent to end may queue no completion
  turn (silent, killed), and claims may arrive out of their turns' order (a delayed job). The
  claimer is named, so the same job retried claims again, with the same outcome.

  KEYS[1] the run's registry record, KEYS[2] its child session's active runs (what it spawned),
  KEYS[3] that session's inbox, KEYS[4] its in-flight list, KEYS[5] its pending completions (set)
  ARGV[1] the claimer (a runId of the run's session, ended), ARGV[2] the claimer's order key
  (fixed width, compared as strings: newer is greater), ARGV[3] the completion it settles ("" none)
  Returns {1, outcome runId, claimer runIds...} when claimed (announce now on that outcome),
  {0} when deferred, {-1} when another claimed it already, {-2, reason} when a kill or steer
  suppressed the run before any claim won (its announce job read the record before that): it
  ends unannounced. A kill is refused once a claim has won (subagent-suppress.lua), so whichever
  of the two comes first decides, and the kill's answer is true.
]]
if ARGV[3] ~= "" then redis.call("SREM", KEYS[5], ARGV[3]) end
local claimer = redis.call("HGET", KEYS[1], "announceClaim")
if claimer then
  if claimer ~= ARGV[1] then return { -1 } end
else
  local suppressed = redis.call("HGET", KEYS[1], "suppressAnnounce")
  if suppressed then return { -2, suppressed } end
  redis.call("HSET", KEYS[1], "claim:" .. ARGV[1], ARGV[2])
  local pending = redis.call("SCARD", KEYS[2]) > 0 or redis.call("SCARD", KEYS[5]) > 0
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
    return { 0 }
  end
end
local fields = redis.call("HGETALL", KEYS[1])
local out, best, bestOrder = { 1 }, nil, nil
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 6) == "claim:" then
    local id = string.sub(fields[i], 7)
    out[#out + 1] = id
    if not bestOrder or fields[i + 1] > bestOrder then best, bestOrder = id, fields[i + 1] end
  end
end
-- A record claimed by a previous release has no claimer fields: its own claimer is the outcome.
local outcome = redis.call("HGET", KEYS[1], "announceOutcome") or best or ARGV[1]
if not claimer then redis.call("HSET", KEYS[1], "announceClaim", ARGV[1], "announceOutcome", outcome) end
table.insert(out, 2, outcome)
return out

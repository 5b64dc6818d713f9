--[[
  A sub-agent run that is registered but whose turn was never queued: its spawn (or steer) was
  cut off between the registration and the push (a process killed, a Redis error on the push).
  No turn runs it, so no announce job will ever end it, and it holds one of its requester's
  child slots. Refused when the run has a run record: the push writes the record in the same
  step as the turn, so a record means its turn was queued, and the run and its announce job
  account for it.

  KEYS[1] registry record {p}:sa:run:<runId>, KEYS[2] run record {p}:run:<runId>,
  KEYS[3] requester runs {p}:sa:req:<requester> (zset), KEYS[4] active runs {p}:sa:active:<requester> (set),
  KEYS[5] child's current run {p}:sa:child:<childKey> (string; a key that never exists when the
          registry record is gone),
  KEYS[6] owed releases {p}:sa:release-owed (zset member -> ms on Redis's clock)
  KEYS[7] drop: the registry record of the run this one replaced (a steer's), else a key that
          never exists
  ARGV[1] runId, ARGV[2] "drop", "end" or "stop",
  ARGV[3] drop: only a run registered (createdAt) before this instant (ms); end, stop: the endedAt (ms)
  ARGV[4] the run's member of KEYS[6], ARGV[5] "1" when its requester is a sub-agent (a release is
  owed to it), "" when not

  Whatever is done (dropped or ended) leaves the run out of its requester's active set without
  an announce, so a requester that waits for it (an orchestrator) must be released
  (src/subagents/announce.ts releaseRequester). That release is owed from this very step: it is
  recorded in KEYS[6] here, removed once the release is done, and the maintenance sweep does it
  for a caller that died (or lost Redis) in between.

  drop (a spawn whose push failed, or a registration older than a grace period): the
  registration is undone, so a spawn made again (a re-run of its turn) registers afresh: the
  record is deleted, the run leaves its requester's lists, and the child's current run is
  cleared if it is this one. A run a steer started (`replaces`) was cut off between the steer's
  swap and its push: the run it replaced, which the steer then neither stopped nor followed,
  is given back its place: its suppression and `replacedBy` removed, active again, the child's
  current run again. It announces its own end as if never steered; when its announce job has
  already marked it `suppressed` (subagent-suppressed.lua), its announce is `pending` again and
  `reannounce` names this run: the caller (or the sweep, the step also records it as owed) adds
  a new announce job for it (src/subagents/announce.ts releaseRequester).
  end (a kill, which suppressed the run's announce first: subagent-suppress.lua): the record
  stays, ended as `killed` with its announce `suppressed`, and leaves the active set.
  stop (the run's own child session stopped, reset or deleted): as end, the announce suppressed
  by a kill in the same step, so a spawn still alive that pushes after this finds the
  suppression and stops the turn it queued (src/tools/sessions-spawn.ts). Only a run still
  `running`, neither replaced by a steer nor suppressed for another reason.

  Returns 0 when refused (a run record exists; for drop, not running or registered at or after ARGV[3]; for
  end, not suppressed by a kill; for stop, not running as said), 1 when done, 2 when dropped and
  the child session held only this run (it was the child's current run and replaced none: the
  session its spawn created), 3 when dropped and the run it replaced is to be announced again.
]]
local SUPPRESSED_BY_KILL = "killed"
local SUPPRESSED_BY_STEER = "steer-restart"
local function owe_release(always)
  if ARGV[5] == "" and not always then return end
  local t = redis.call("TIME")
  redis.call("ZADD", KEYS[6], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[4])
end
if redis.call("EXISTS", KEYS[2]) == 1 then return 0 end
if ARGV[2] == "end" then
  if redis.call("HGET", KEYS[1], "suppressAnnounce") ~= SUPPRESSED_BY_KILL then return 0 end
  redis.call("HSET", KEYS[1], "status", "killed", "endedAt", ARGV[3], "announce", "suppressed")
  redis.call("SREM", KEYS[4], ARGV[1])
  owe_release()
  return 1
end
if ARGV[2] == "stop" then
  local run = redis.call("HMGET", KEYS[1], "status", "suppressAnnounce", "replacedBy")
  if run[1] ~= "running" or run[3] or (run[2] and run[2] ~= SUPPRESSED_BY_KILL) then return 0 end
  redis.call("HSET", KEYS[1], "suppressAnnounce", SUPPRESSED_BY_KILL, "status", "killed", "endedAt", ARGV[3],
    "announce", "suppressed")
  redis.call("SREM", KEYS[4], ARGV[1])
  owe_release()
  return 1
end
local reg = redis.call("HMGET", KEYS[1], "createdAt", "replaces", "status")
-- Only a run still registered as running: one a kill ended meanwhile keeps its record.
if reg[3] ~= "running" then return 0 end
if reg[1] and tonumber(reg[1]) >= tonumber(ARGV[3]) then return 0 end
-- The run a cut-off steer replaced by this one, given back its place (see above).
local restored, reannounce = false, false
if reg[2] then
  local prev = redis.call("HMGET", KEYS[7], "replacedBy", "suppressAnnounce", "announce")
  if prev[1] == ARGV[1] and prev[2] == SUPPRESSED_BY_STEER then
    restored = true
    redis.call("HDEL", KEYS[7], "replacedBy", "suppressAnnounce")
    -- Active again (its announce's end takes it out, marking what it owes an orchestrator).
    redis.call("SADD", KEYS[4], reg[2])
    if prev[3] == "suppressed" then
      reannounce = true
      redis.call("HSET", KEYS[7], "announce", "pending", "reannounce", ARGV[1])
    end
  end
end
owe_release(reannounce)
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[3], ARGV[1])
redis.call("SREM", KEYS[4], ARGV[1])
local code = reannounce and 3 or 1
if redis.call("GET", KEYS[5]) ~= ARGV[1] then return code end
if restored then
  local ttl = redis.call("PTTL", KEYS[5])
  if ttl > 0 then redis.call("SET", KEYS[5], reg[2], "PX", ttl) else redis.call("SET", KEYS[5], reg[2]) end
  return code
end
redis.call("DEL", KEYS[5])
if reg[2] then return 1 end
return 2

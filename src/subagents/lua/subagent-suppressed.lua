--[[
  The announce job of a suppressed run (steered or killed) marks its announce `suppressed`, only
  while the suppression is still there. A steer cut off between its swap (subagent-replace.lua)
  and the push of its new run's turn leaves the replaced run suppressed for a run that never
  runs; dropping that run (subagent-unqueued.lua) gives the replaced run back its announce. The
  two are one step each on the same record, so either the drop comes first (the job finds no
  suppression here and announces the run after all), or this mark does (the drop sees the announce
  `suppressed` and has the run announced again by a new job).

  KEYS[1] the run's registry record
  ARGV[1] the announce value to set ("suppressed")
  Returns 1 when marked, 0 when the run is no longer suppressed (or its record is gone).
]]
if not redis.call("HGET", KEYS[1], "suppressAnnounce") then return 0 end
redis.call("HSET", KEYS[1], "announce", ARGV[1])
return 1

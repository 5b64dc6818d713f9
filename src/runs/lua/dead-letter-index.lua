--[[
  Bring the dead-letter index (zset runId → failedAt ms) in line with the dead letters (hash), one
  runId at a time, each checked in the same step as its change, so a letter replayed or discarded
  meanwhile is never indexed again and one written meanwhile is never unindexed.
  Every writer keeps the two together (run-finish.lua, turn-discard.lua, DeadLetters.discard); this
  is for letters written before the index existed (or by a process that did not know it yet), and
  for index entries whose letter such a process removed.

  KEYS[1] dead-letter hash, KEYS[2] dead-letter index (zset)
  ARGV[1] "add": then runId, failedAt pairs, each indexed (unless indexed already) if its letter exists;
          "prune": then runIds, each unindexed if its letter does not exist
  Returns how many index entries were added or removed.
]]
local changed = 0
if ARGV[1] == "add" then
  for i = 2, #ARGV - 1, 2 do
    if redis.call("HEXISTS", KEYS[1], ARGV[i]) == 1 then
      changed = changed + redis.call("ZADD", KEYS[2], "NX", tonumber(ARGV[i + 1]), ARGV[i])
    end
  end
elseif ARGV[1] == "prune" then
  for i = 2, #ARGV do
    if redis.call("HEXISTS", KEYS[1], ARGV[i]) == 0 then changed = changed + redis.call("ZREM", KEYS[2], ARGV[i]) end
  end
end
return changed

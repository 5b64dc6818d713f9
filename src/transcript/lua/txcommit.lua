--[[
  Index what was just appended: the ids go into the id set and, if we still own the lock and the
  index is still the one this append read, `size` moves to the new end of file. Atomic, so the
  index never claims bytes whose ids it lacks. If the lock was lost meanwhile, `size` is left
  alone: the next holder re-reads the file from the old `size` (reconcile), which is always safe
  because SADD is idempotent. If the index expired or was reset meanwhile (its `size` is not
  ARGV[4] any more), `size` is not moved either: the set may lack the ids before it, and the next
  append starts the index over. Both keys get the TTL again (see txindex-open.lua).
  KEYS[1] lock key, KEYS[2] index hash, KEYS[3] id set
  ARGV[1] lock token, ARGV[2] new indexed size, ARGV[3] file (relative path),
  ARGV[4] the indexed size this append read, ARGV[5] TTL ms, ARGV[6..] ids
  Returns 1 if `size` was updated, 0 if the lock was lost or the index changed.
]]
local n = #ARGV
local i = 6
while i <= n do
  local last = math.min(i + 999, n) -- stay well below Lua's unpack() stack limit
  redis.call("SADD", KEYS[3], unpack(ARGV, i, last))
  i = last + 1
end
local moved = 0
if redis.call("GET", KEYS[1]) == ARGV[1] and redis.call("HGET", KEYS[2], "size") == ARGV[4] then
  redis.call("HSET", KEYS[2], "size", ARGV[2], "file", ARGV[3])
  moved = 1
end
redis.call("PEXPIRE", KEYS[2], ARGV[5])
redis.call("PEXPIRE", KEYS[3], ARGV[5])
return moved

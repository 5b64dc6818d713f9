--[[
  Index what was just appended: the ids go into the id set and, if we still own the lock,
  `size` moves to the new end of file. Atomic, so the index never claims bytes whose ids it
  lacks. If the lock was lost meanwhile, `size` is left alone: the next holder re-reads the
  file from the old `size` (reconcile), which is always safe because SADD is idempotent.
  KEYS[1] lock key, KEYS[2] index hash, KEYS[3] id set
  ARGV[1] lock token, ARGV[2] new indexed size, ARGV[3] file (relative path), ARGV[4..] ids
  Returns 1 if `size` was updated, 0 if the lock was lost.
]]
local n = #ARGV
local i = 4
while i <= n do
  local last = math.min(i + 999, n) -- stay well below Lua's unpack() stack limit
  redis.call("SADD", KEYS[3], unpack(ARGV, i, last))
  i = last + 1
end
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("HSET", KEYS[2], "size", ARGV[2], "file", ARGV[3])
  return 1
end
return 0

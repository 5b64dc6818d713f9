--[[
  Index the ids of lines read from a transcript file (reconciling lines written behind the
  index, or rebuilding it), keeping both keys' expiry together (see txindex-open.lua). The
  indexed `size` is not moved here: txcommit.lua moves it once every id before it is in.
  KEYS[1] index hash, KEYS[2] id set
  ARGV[1] TTL ms, ARGV[2..] ids
  Returns the number of ids not in the set before.
]]
local added = 0
local n = #ARGV
local i = 2
while i <= n do
  local last = math.min(i + 999, n) -- stay well below Lua's unpack() stack limit
  added = added + redis.call("SADD", KEYS[2], unpack(ARGV, i, last))
  i = last + 1
end
redis.call("PEXPIRE", KEYS[1], ARGV[1])
redis.call("PEXPIRE", KEYS[2], ARGV[1])
return added

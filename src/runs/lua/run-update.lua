--[[
  Write fields of a run record, only while holding the session lease (fencing).
  KEYS[1] lease, KEYS[2] run hash
  ARGV[1] token, ARGV[2..] field, value pairs
  Returns 1, or the error "STALE".
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("STALE")
end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call("HSET", KEYS[2], unpack(fields))
return 1

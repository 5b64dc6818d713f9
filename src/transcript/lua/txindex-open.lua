--[[
  Open a transcript's index for an append (under the transcript lock), in one round trip: read
  it, start it over when it does not describe this file, and keep it alive. The index is a cache
  of the file (its entry ids, so appends are idempotent on them), rebuilt from byte 0 whenever it
  is missing, so it is kept only ARGV[3] ms past its last use: what `switchboard import` or a
  forked spawn indexed does not stay in Redis for good. Both keys always get the same expiry.
  An index that is missing (expired, flushed), foreign (another agent's file with the same
  sessionId) or impossible (longer than the file: replaced or truncated) is reset to `size` 0
  for this file, with no ids, so the caller reads the file from byte 0.
  KEYS[1] index hash, KEYS[2] id set
  ARGV[1] the file's size in bytes, ARGV[2] the file (relative path), ARGV[3] TTL ms
  Returns the indexed size: the bytes whose ids the set holds (0 after a reset).
]]
local fields = redis.call("HMGET", KEYS[1], "size", "file")
local indexed = tonumber(fields[1])
if not indexed or indexed ~= math.floor(indexed) or indexed < 0 or indexed > tonumber(ARGV[1])
    or fields[2] ~= ARGV[2] then
  redis.call("DEL", KEYS[1], KEYS[2])
  redis.call("HSET", KEYS[1], "size", 0, "file", ARGV[2])
  indexed = 0
end
redis.call("PEXPIRE", KEYS[1], ARGV[3])
redis.call("PEXPIRE", KEYS[2], ARGV[3])
return indexed

--[[
  Read a transcript's index without the lock (an import's dry run: see present() in
  transcript-store.ts), and keep it alive as an append's txindex-open.lua does: a read is a use,
  and an index an older version left without an expiry gets one here too, not only on the next
  append (which may never come). Nothing is reset: an index that does not describe the file is
  the caller's to ignore (it reads the file), and expires. Both keys get the same expiry.
  KEYS[1] index hash, KEYS[2] id set
  ARGV[1] TTL ms
  Returns {size, file}: the hash's fields, nil where missing.
]]
local fields = redis.call("HMGET", KEYS[1], "size", "file")
redis.call("PEXPIRE", KEYS[1], ARGV[1])
redis.call("PEXPIRE", KEYS[2], ARGV[1])
return fields

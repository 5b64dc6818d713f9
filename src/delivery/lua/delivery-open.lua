--[[
  Create a delivery's record once: every field is set only if absent (HSETNX) and the index
  entries only if absent (ZADD NX), so a retry after a crash completes a half-made record instead
  of leaving it without its fields and index entries, and never resets the status or attempts of
  one that exists. A delivery settled without an attempt (no adapter, blocked) gets its outcome
  in the same step. One script, not a MULTI of twenty commands: the client pays per command.

  KEYS[1] record hash, KEYS[2] the deployment's delivery index (zset),
  KEYS[3] the session's, KEYS[4] the channel's (zsets)
  ARGV[1] the record's field, value pairs (JSON list of strings), ARGV[2] its id,
  ARGV[3] its ts (ms, the indexes' score), ARGV[4] TTL of the record and the indexes (seconds),
  ARGV[5] the most entries an index keeps, ARGV[6] the oldest score the per-session and
  per-channel indexes keep (older ones outlived their records),
  ARGV[7] the settled status or "" (none), ARGV[8] its error, ARGV[9] the message (a field too)
  Returns 1.
]]
local fields = cjson.decode(ARGV[1])
for i = 1, #fields, 2 do redis.call("HSETNX", KEYS[1], fields[i], fields[i + 1]) end
redis.call("HSETNX", KEYS[1], "message", ARGV[9])
if ARGV[7] ~= "" then redis.call("HSET", KEYS[1], "status", ARGV[7], "error", ARGV[8]) end
local ttl, cap = tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call("EXPIRE", KEYS[1], ttl)
redis.call("ZADD", KEYS[2], "NX", ARGV[3], ARGV[2])
redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -cap - 1)
-- The per-session and per-channel indexes drop what is older than a record lives, and go with
-- their last record: a deleted session's index does not outlive its deliveries.
for k = 3, 4 do
  redis.call("ZADD", KEYS[k], "NX", ARGV[3], ARGV[2])
  redis.call("ZREMRANGEBYSCORE", KEYS[k], "-inf", "(" .. ARGV[6])
  redis.call("ZREMRANGEBYRANK", KEYS[k], 0, -cap - 1)
  redis.call("EXPIRE", KEYS[k], ttl)
end
return 1

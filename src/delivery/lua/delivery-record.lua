--[[
  Shared by delivery-open.lua and delivery-begin.lua
  (included with --@include; not a script itself): create a delivery's record once. Every field
  is set only if absent (HSETNX) and the index entries only if absent (ZADD NX), so a retry after
  a crash completes a half-made record
  instead of leaving it without its fields and index entries, and never resets the status or
  attempts of one that exists.

  open_record(rec, index, bySession, byChannel, fields, id, ts, ttl, cap, oldest, message):
  the record hash, the deployment's delivery index, the session's and the channel's (zsets); the
  record's field, value pairs (JSON list of strings), its id, its ts (ms, the indexes' score), the
  TTL of the record and the indexes (seconds), the most entries an index keeps, the oldest score
  the per-session and per-channel indexes keep (older ones outlived their records), the message.
]]
local function open_record(rec, index, bySession, byChannel, fields, id, ts, ttl, cap, oldest, message)
  local pairs_ = cjson.decode(fields)
  for i = 1, #pairs_, 2 do redis.call("HSETNX", rec, pairs_[i], pairs_[i + 1]) end
  redis.call("HSETNX", rec, "message", message)
  ttl, cap = tonumber(ttl), tonumber(cap)
  redis.call("EXPIRE", rec, ttl)
  redis.call("ZADD", index, "NX", ts, id)
  redis.call("ZREMRANGEBYRANK", index, 0, -cap - 1)
  -- The per-session and per-channel indexes drop what is older than a record lives, and go with
  -- their last record: a deleted session's index does not outlive its deliveries.
  for _, k in ipairs({ bySession, byChannel }) do
    redis.call("ZADD", k, "NX", ts, id)
    redis.call("ZREMRANGEBYSCORE", k, "-inf", "(" .. oldest)
    redis.call("ZREMRANGEBYRANK", k, 0, -cap - 1)
    redis.call("EXPIRE", k, ttl)
  end
end

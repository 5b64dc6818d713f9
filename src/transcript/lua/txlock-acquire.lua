--[[
  Fair (FIFO) transcript lock. A plain `SET NX` retry loop starves waiters: the process that
  just released re-acquires within microseconds while the others sleep in backoff (measured:
  4 processes appending in a loop ran one after the other). So waiters queue up, and a free
  lock goes to the oldest live waiter; a newcomer only takes it when nobody is waiting.

  KEYS[1] lock (string: holder token, PX ttl), KEYS[2] queue (zset token -> arrival ms),
  KEYS[3] heartbeats (zset token -> last poll ms)
  ARGV[1] token, ARGV[2] lock TTL ms, ARGV[3] stale ms (a waiter that has not polled for this
  long crashed or gave up: it is dropped so it cannot block the queue)
  Returns -1 when the lock was acquired, else the caller's 0-based place in the queue.
]]
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]

-- Ours already: this acquire ran before and its answer was lost with the connection, and the
-- client sent it again (ioredis does after a reconnect). Tokens are new per acquire, so only
-- that acquire can find its own token here; without this it would queue behind its own lock
-- and wait out the lock TTL.
if redis.call("GET", KEYS[1]) == token then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return -1
end

-- Fast path, the common case (one lease holder per session is the only writer): nobody
-- waits and the lock is free.
if redis.call("EXISTS", KEYS[2]) == 0 and redis.call("SET", KEYS[1], token, "NX", "PX", ARGV[2]) then
  return -1
end

local dead = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now - tonumber(ARGV[3]))
for _, w in ipairs(dead) do
  if w ~= token then
    redis.call("ZREM", KEYS[2], w)
    redis.call("ZREM", KEYS[3], w)
  end
end

if redis.call("EXISTS", KEYS[1]) == 0 then
  local head = redis.call("ZRANGE", KEYS[2], 0, 0)[1]
  if head == nil or head == token then
    redis.call("SET", KEYS[1], token, "PX", ARGV[2])
    redis.call("ZREM", KEYS[2], token)
    redis.call("ZREM", KEYS[3], token)
    return -1
  end
end

redis.call("ZADD", KEYS[2], "NX", now, token)
redis.call("ZADD", KEYS[3], now, token)
-- If every waiter dies the queue keys still go away on their own.
local keep = tonumber(ARGV[3]) * 5
redis.call("PEXPIRE", KEYS[2], keep)
redis.call("PEXPIRE", KEYS[3], keep)
return redis.call("ZRANK", KEYS[2], token)

--[[
  A waiter gives up (lock wait timed out, or the caller was aborted): leave the queue at
  once instead of blocking the others until its heartbeat goes stale.
  KEYS[1] queue, KEYS[2] heartbeats; ARGV[1] token. Returns 1.
]]
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
return 1

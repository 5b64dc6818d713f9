--[[
  Record a delivery's attempt or outcome: with ARGV[5] = "1" one attempt more (attempts + 1), then
  the status and the error (an attempt without error clears it). A settled delivery (any status
  but pending) leaves its lane (delivery-lane.lua); when it was the lane's first member, the new
  first member is returned, for its waiting job to be woken (one settled behind it, e.g. blocked,
  wakes nobody: the first member may be waiting out its own retry delay). One script, not a MULTI
  of four commands.

  KEYS[1] record hash; with a lane: KEYS[2] the lane (without it, and with ARGV[6], the lane the
  record names, a key of the same `{prefix}` hash tag: delivery-lane.lua)
  ARGV[1] status, ARGV[2] error or "" (none), ARGV[3] the delivery id, ARGV[4] the record key
  prefix, ARGV[5] "1" to count an attempt, ARGV[6] "1": only a delivery still pending is settled
  Returns the lane's new first member as lane_head does, or {} (none to wake); 0 when ARGV[6]
  found it settled already (nothing changed).
]]
--@include delivery-lane
if ARGV[6] == "1" and redis.call("HGET", KEYS[1], "status") ~= "pending" then return 0 end
if ARGV[5] == "1" then redis.call("HINCRBY", KEYS[1], "attempts", 1) end
redis.call("HSET", KEYS[1], "status", ARGV[1])
if ARGV[2] ~= "" then
  redis.call("HSET", KEYS[1], "error", ARGV[2])
elseif ARGV[5] == "1" then
  redis.call("HDEL", KEYS[1], "error")
end
local lane = KEYS[2] or (ARGV[6] == "1" and redis.call("HGET", KEYS[1], "lane"))
if not lane or ARGV[1] == "pending" then return {} end
local rank = redis.call("ZRANK", lane, ARGV[3])
redis.call("ZREM", lane, ARGV[3])
if rank ~= 0 then return {} end
return lane_head(lane, ARGV[4])

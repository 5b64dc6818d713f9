--[[
  An attempt at a delivery begins: its record is created if the queueing did not (a job queued
  by an older release, or a sub-agent announce that posts itself), and one already delivered is
  not sent again; nor one that failed for good, unless its job was retried on purpose (ARGV[7]):
  a job re-run after a crash that followed its last attempt's record must not post it again, now
  behind newer messages. Any other is pending from here (blocked or no adapter: decided again).
  With a lane (delivery-lane.lua) it joins it if it is not in it, and learns whether it is the
  lane's first member, the only one sent.

  KEYS[1] record hash, KEYS[2..4] its indexes (as delivery-open.lua); with a lane: KEYS[5] the
  lane, KEYS[6] the sequence counter
  ARGV[1] the record's field, value pairs, ARGV[2..6] and ARGV[9] as delivery-open.lua;
  ARGV[7] "1": a record that failed for good is tried again (its job was retried after it failed);
  ARGV[8] unused; with a lane: ARGV[10] the sending job's queue, ARGV[11] its job id,
  ARGV[12] now (ms), ARGV[13] the record key prefix
  Returns {"delivered"}, {"failed", error} (failed for good, not retried),
  {"pending", "first"} (send it: first in its lane, or no lane), or
  {"pending", "behind", id, ownerQueue, ownerJob, seenAt, status} (the lane's first member).
]]
--@include delivery-record
--@include delivery-lane
open_record(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[9])
local status = redis.call("HGET", KEYS[1], "status")
if status == "delivered" then return { "delivered" } end
if status == "failed" and ARGV[7] ~= "1" then return { "failed", redis.call("HGET", KEYS[1], "error") or "" } end
if status ~= "pending" then redis.call("HSET", KEYS[1], "status", "pending") end
if not KEYS[5] then
  -- No lane now (its channel became a log one, or lost its adapter): out of the one it was in.
  local was = redis.call("HGET", KEYS[1], "lane")
  if was then
    redis.call("ZREM", was, ARGV[2])
    redis.call("HDEL", KEYS[1], "lane")
  end
  return { "pending", "first" }
end
lane_join(KEYS[5], KEYS[6], KEYS[1], ARGV[2], ARGV[10], ARGV[11], ARGV[12], ARGV[4])
local head = lane_head(KEYS[5], ARGV[13])
if head[1] == ARGV[2] then return { "pending", "first" } end
return { "pending", "behind", head[1], head[2], head[3], head[4], head[5] }

--[[
  Create a delivery's record once (delivery-record.lua), when it is queued or settled at once.
  A delivery settled without an attempt (no adapter, blocked) gets its outcome in the same step;
  one still to be sent to a chat joins the chat's lane (delivery-lane.lua) in the same step, so
  deliveries to one chat are sent in the order they were queued. One script, not a MULTI of
  twenty commands: the client pays per command.

  KEYS[1] record hash, KEYS[2] the deployment's delivery index (zset),
  KEYS[3] the session's, KEYS[4] the channel's (zsets); with a lane: KEYS[5] the lane (zset),
  KEYS[6] the lanes' sequence counter
  ARGV[1] the record's field, value pairs (JSON list of strings), ARGV[2] its id,
  ARGV[3] its ts (ms, the indexes' score), ARGV[4] TTL of the record and the indexes (seconds),
  ARGV[5] the most entries an index keeps, ARGV[6] the oldest score the per-session and
  per-channel indexes keep, ARGV[7] the settled status or "" (none), ARGV[8] its error,
  ARGV[9] the message (a field too); with a lane: ARGV[10] the sending job's queue,
  ARGV[11] its job id, ARGV[12] now (ms)
  Returns 1.
]]
--@include delivery-record
--@include delivery-lane
open_record(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[9])
if ARGV[7] ~= "" then
  redis.call("HSET", KEYS[1], "status", ARGV[7], "error", ARGV[8])
elseif KEYS[5] and redis.call("HGET", KEYS[1], "status") == "pending" then
  -- Only a delivery still to be sent: a settled one queued again (a re-run's reply whose job
  -- is done) would hold the lane with no job left to send it.
  lane_join(KEYS[5], KEYS[6], KEYS[1], ARGV[2], ARGV[10], ARGV[11], ARGV[12], ARGV[4])
end
return 1

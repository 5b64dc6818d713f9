--[[
  Take a lane's first member out whose job is gone (removed by an operator, lost between the
  lane join and the job add, or ended without settling it), so the deliveries behind it are not
  held for ever. Only if its record was not touched since the caller looked (its job came back:
  it stays); a record still pending is settled `failed` with the reason.

  KEYS[1] the lane, KEYS[2] that member's record
  ARGV[1] its id, ARGV[2] the seenAt the caller read ("" for none), ARGV[3] the error to record,
  ARGV[4] the record key prefix
  Returns 0 (left in place: its job was seen since), else {what, the lane's first member after it
  as lane_head does (nothing for an empty lane)}: what is "dropped" (this call took it out) or
  "gone" (it was out already: another delivery behind it passed it, or it settled).
]]
--@include delivery-lane
local what = "gone"
if redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  local f = redis.call("HMGET", KEYS[2], "laneSeenAt", "status")
  if (f[1] or "") ~= ARGV[2] then return 0 end
  redis.call("ZREM", KEYS[1], ARGV[1])
  if f[2] == "pending" then redis.call("HSET", KEYS[2], "status", "failed", "error", ARGV[3]) end
  what = "dropped"
end
local out = { what }
for _, v in ipairs(lane_head(KEYS[1], ARGV[4])) do out[#out + 1] = v end
return out

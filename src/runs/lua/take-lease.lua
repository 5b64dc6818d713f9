--[[
  Shared by lease-acquire.lua and lease-begin.lua (included with --@include; not a script itself).

  take_lease(leaseKey, fenceKey, ttlMs): take the session lease if it is free, with a new
  fencing token (INCR of the session's counter, so a token is used once and a holder that lost
  its lease can never match again). Returns the token, or 0 and the current holder's pttl.
]]
local function take_lease(leaseKey, fenceKey, ttlMs)
  local held = redis.call("PTTL", leaseKey)
  if held > 0 or held == -1 then
    return 0, held
  end
  local token = redis.call("INCR", fenceKey)
  redis.call("SET", leaseKey, token, "PX", tonumber(ttlMs))
  return token
end

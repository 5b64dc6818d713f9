--[[
  Shared by lease-acquire.lua and lease-begin.lua (included with --@include; not a script itself).

  take_lease(leaseKey, fenceKey, ttlMs, takeKey, nonce): take the session lease if it is free,
  with a new fencing token (INCR of the session's counter, so a token is used once and a holder
  that lost its lease can never match again). Returns the token, the current holder's pttl (0
  when the lease was taken) and whether this very take had happened already; the token is 0
  when another holder has the lease.

  A take sent again: a client whose connection drops before the answer arrives sends the
  command again after reconnecting (ioredis does), so the same take can run twice. The first
  run took the lease; the second would find it held and leave its own holder waiting out the
  TTL. So every take carries a `nonce` (new per call), kept in `takeKey` while the lease is
  fresh: a take that finds the lease held under its own nonce answers with the token it got.
  Another taker overwrites the nonce, so an old take never claims a lease taken since.

  The counter expires a week after the session's last take (FENCE_TTL_MS): a key per session
  that ever ran would otherwise stay for good. A week is far beyond any lease or stalled holder,
  and tokens are only ever compared for equality with the current lease.
]]
local FENCE_TTL_MS = 7 * 24 * 3600 * 1000
local function take_lease(leaseKey, fenceKey, ttlMs, takeKey, nonce)
  local held = redis.call("PTTL", leaseKey)
  if held > 0 or held == -1 then
    if redis.call("GET", takeKey) == nonce then
      return tonumber(redis.call("GET", leaseKey)), 0, true
    end
    return 0, held, false
  end
  local token = redis.call("INCR", fenceKey)
  redis.call("PEXPIRE", fenceKey, FENCE_TTL_MS)
  redis.call("SET", leaseKey, token, "PX", tonumber(ttlMs))
  redis.call("SET", takeKey, nonce, "PX", tonumber(ttlMs))
  return token, 0, false
end

--[[
  Give back an inbound messageId claim, only if it is still ours (compare-and-delete), so a
  channel's retry can be handled after this gateway failed to handle the message.
  KEYS[1] claim key; ARGV[1] our claim value. Returns 1 when released, else 0.
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0

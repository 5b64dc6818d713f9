--[[
  Replace an inbound messageId claim with the message's answer, only if the claim is still ours
  (compare-and-set): a claim that expired and was taken by another gateway is left to it.
  KEYS[1] claim key; ARGV[1] our claim value, ARGV[2] the answer (JSON), ARGV[3] its TTL in
  seconds. Returns 1 when written, else 0.
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[2], "EX", tonumber(ARGV[3]))
  return 1
end
return 0

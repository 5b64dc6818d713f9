--[[
  Shared by the delivery scripts (included with --@include; not a script itself): a chat's
  delivery lane (docs/concepts/reliability.md, "Replies reach a chat in order"). The lane is a
  sorted set of the deliveries to one chat not yet settled, scored by a deployment-wide sequence
  taken when each joined, so its first member is the oldest: only that one is sent, the others
  wait their turn.

  lane_join(lane, seq, rec, id, ownerQueue, ownerJob, now, ttl): the delivery `id` (record `rec`)
  joins `lane` once, taking the next number of the counter `seq`; its record notes the lane (a
  delivery whose chat changed between attempts, a sub-agent announce whose requester moved, leaves
  the lane it was in), the job that sends it (queue, job id) and when that job was last seen
  working on it (ms), which is how a delivery behind it tells a slow first member from one whose
  job is gone. A lane nobody joined for `ttl` seconds expires.

  lane_head(lane, recPrefix): the lane's first member as {id, ownerQueue, ownerJob, seenAt,
  status} (read from its record, `recPrefix` .. id), or {} for an empty lane.
]]
local function lane_join(lane, seq, rec, id, ownerQueue, ownerJob, now, ttl)
  local was = redis.call("HGET", rec, "lane")
  if was and was ~= lane then redis.call("ZREM", was, id) end
  redis.call("HSET", rec, "lane", lane, "ownerQueue", ownerQueue, "ownerJob", ownerJob, "laneSeenAt", now)
  if not redis.call("ZSCORE", lane, id) then redis.call("ZADD", lane, redis.call("INCR", seq), id) end
  redis.call("EXPIRE", lane, ttl)
end

local function lane_head(lane, recPrefix)
  local first = redis.call("ZRANGE", lane, 0, 0)[1]
  if not first then return {} end
  local f = redis.call("HMGET", recPrefix .. first, "ownerQueue", "ownerJob", "laneSeenAt", "status")
  return { first, f[1] or "", f[2] or "", f[3] or "", f[4] or "" }
end

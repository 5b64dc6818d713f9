--[[
  A sessions_send caller gives up waiting: either the run already finished (the caller gets
  the reply now) or the late flag is set before it can finish, so the agent-to-agent flow,
  which starts only once the run is terminal, is guaranteed to see the flag and deliver the
  reply to the requester. One script, so there is no gap between the check and the flag.

  KEYS[1] run hash, KEYS[2] late flag
  ARGV[1] flag ttl seconds
  Returns the terminal status, or "late".
]]
--@include run-status
local status = redis.call("HGET", KEYS[1], "status")
if is_terminal(status) then
  return status
end
redis.call("SET", KEYS[2], "1", "EX", tonumber(ARGV[1]))
return "late"

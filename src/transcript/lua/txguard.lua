--[[
  Last check before bytes go to the transcript, in one round trip and atomically:
    1. we still own the transcript lock (it may have expired during a long pause), and its
       TTL is refreshed so the write that follows has a full TTL to finish;
    2. when a fence is given, the session lease's fencing token is still ours: a worker whose
       lease was taken over must not write after the new holder. The check is made while
       holding the transcript lock, so the new holder's own writes queue behind ours.
  KEYS[1] lock key, KEYS[2] (optional) fence key
  ARGV[1] lock token, ARGV[2] lock TTL ms, ARGV[3] (with KEYS[2]) our fencing token
  Returns {1, ""} ok, {0, ""} lock lost, {-1, current or ""} stale fence.
]]
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return {0, ""}
end
redis.call("PEXPIRE", KEYS[1], ARGV[2])
if #KEYS > 1 then
  local current = redis.call("GET", KEYS[2])
  if not current or tonumber(current) == nil or tonumber(current) ~= tonumber(ARGV[3]) then
    return {-1, current or ""}
  end
end
return {1, ""}

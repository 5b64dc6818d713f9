--[[
  Release a transcript lock only if we still own it (compare-and-delete).
  A plain DEL could remove a lock that expired and was then taken by another writer.
  KEYS[1] lock key; ARGV[1] our token. Returns 1 if released, 0 if not ours (any more).
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0

-- Drop the id index entries of tasks that are gone (the sweep, clean, queue deletion): each
-- task's field in its bucket, and the key per task older versions wrote. One command for a chunk
-- instead of an HDEL and a DEL per task. The keys lie in many slots: used on a single Redis
-- only, never on a cluster.
-- KEYS[i] the bucket of the i-th task   KEYS[n + i] the i-th task's older key (n = #ARGV)
-- ARGV[i] the i-th task's id
-- Returns how many fields and keys were deleted.
local n, deleted = #ARGV, 0
for i = 1, n do
  deleted = deleted + redis.call('HDEL', KEYS[i], ARGV[i]) + redis.call('DEL', KEYS[n + i])
end
return deleted

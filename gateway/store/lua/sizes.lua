-- The sizes of many sorted sets, of any queues (changes nothing): how the admin UI learns
-- which queues hold running or dead tasks, or orders every queue by a state's size, with one
-- command instead of one per queue. Single Redis only: a Redis Cluster refuses keys of several
-- slots in one script, so there the caller sends a pipeline of ZCARDs instead.
-- KEYS    the sorted sets
-- Returns their sizes, in order (0 for a key that does not exist)
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('ZCARD', KEYS[i])
end
return out

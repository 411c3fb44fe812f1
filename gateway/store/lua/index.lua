-- Point new tasks' index entries at their queue: the field of each task id in its bucket of the
-- id index. One command for a batch instead of an HSET per task. The buckets lie in other slots
-- than the queue's: used on a single Redis only, never on a cluster.
-- KEYS[i] the bucket of the i-th task (gateway.store.keys.task_index)
-- ARGV[1] queue name   ARGV[1 + i] the i-th task's id
-- Returns how many entries were set.
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], ARGV[i + 1], ARGV[1])
end
return #KEYS

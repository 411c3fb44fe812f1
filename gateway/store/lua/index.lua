-- Point new tasks' index entries at their queue, each with its expiry (a backstop: the sweep
-- deletes an entry with its task). One command for a batch instead of a SET per task. The keys
-- lie in other slots than the queue's: used on a single Redis only, never on a cluster.
-- KEYS[i] the index entry of the i-th task
-- ARGV[1] queue name   ARGV[1 + i] expiry of KEYS[i], ms from now
-- Returns how many entries were set.
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[i + 1])
end
return #KEYS

-- Lower a queue's entry in the global due index to a time (or add it), and when that makes it
-- the earliest of the index, publish the time so that sleeping recoverers wake for it.
-- One key only (the index), so it runs on Redis Cluster whatever slot the queue is on.
-- KEYS[1] the due index (jg:due)
-- ARGV[1] queue name   ARGV[2] due ms   ARGV[3] the channel recoverers listen on
-- Returns 1 when the entry changed, else 0 (it held this time or an earlier one).
if redis.call('ZADD', KEYS[1], 'LT', 'CH', ARGV[2], ARGV[1]) == 0 then
  return 0
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0)
if first[1] == ARGV[1] then
  redis.call('PUBLISH', ARGV[3], ARGV[2])
end
return 1

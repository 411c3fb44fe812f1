-- Claim the events due for finishing: those whose accepting gateway stopped before it was done
-- with them (or whose last claim's lease ran out). Each claimed entry's time moves a lease
-- ahead, so another gateway's recoverer leaves it alone while this one finishes it.
-- One key only (the pending index), so it runs on Redis Cluster whatever slot it is on.
-- KEYS[1] the pending events (jg:events:pending)
-- ARGV[1] now ms   ARGV[2] the lease ms   ARGV[3] most entries to claim
-- Returns the claimed event ids, oldest due first.
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[3])
local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', until_ms, id)
end
return due

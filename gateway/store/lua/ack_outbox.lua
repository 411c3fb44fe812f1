-- Drop the first N notices of a queue's outbox once they have been delivered, unless another
-- gateway delivered and dropped them first (then the head is no longer the one delivered).
-- KEYS[1] outbox
-- ARGV[1] the first notice delivered   ARGV[2] how many were delivered
-- Returns 1 when dropped, 0 when the head had changed.
if redis.call('LINDEX', KEYS[1], 0) ~= ARGV[1] then
  return 0
end
redis.call('LTRIM', KEYS[1], tonumber(ARGV[2]), -1)
return 1

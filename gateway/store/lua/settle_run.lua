-- Keep what was seen of a finished run in its record (it outlives the task's retention), unless
-- the run was deleted meanwhile.
-- KEYS[1] run records (HASH)
-- ARGV[1] run id   ARGV[2] run record JSON
-- Returns 1 when written, 0 when the run is gone.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1

-- The task of a run begun by begin_run is enqueued: clear the job's ``pending`` mark.
-- KEYS[1] job hash
-- ARGV[1] now ms   ARGV[2] run id   ARGV[3] held re-check ms   ARGV[4] pending resume ms
-- Returns {'OK', due ms or ''} | {'NOJOB'}
if redis.call('HEXISTS', KEYS[1], 'def') == 0 then
  return {'NOJOB'}
end
local pending = redis.call('HGET', KEYS[1], 'pending')
if pending and string.match(pending, '^(%S+) ') == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'pending')
end
return {'OK', job_due(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4]))}

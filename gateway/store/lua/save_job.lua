-- Create a job, or replace its definition, and set its next fire time.
-- KEYS[1] job hash   KEYS[2] pending runs (ZSET)
-- ARGV[1] now ms   ARGV[2] definition JSON   ARGV[3] next fire ms, or '' for none
-- ARGV[4] 'create' | 'replace'   ARGV[5] held re-check ms   ARGV[6] pending resume ms
-- Returns {'OK', due ms or ''} | {'EXISTS'} (create) | {'NOJOB'} (replace)
local now = tonumber(ARGV[1])
local exists = redis.call('HEXISTS', KEYS[1], 'def') == 1
if ARGV[4] == 'create' and exists then
  return {'EXISTS'}
end
if ARGV[4] == 'replace' and not exists then
  return {'NOJOB'}
end
redis.call('HSET', KEYS[1], 'def', ARGV[2])
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], 'next')
else
  redis.call('HSET', KEYS[1], 'next', ARGV[3])
end
return {'OK', job_due(KEYS[1], KEYS[2], now, tonumber(ARGV[5]), tonumber(ARGV[6]))}

-- Delete one run of a job, its end with it (its task stays in its queue until swept).
-- KEYS[1] job hash   KEYS[2] runs (ZSET)   KEYS[3] run records (HASH)
-- ARGV[1] run id
-- Returns 1 when deleted, 0 when there was no such run.
local id = ARGV[1]
if redis.call('HDEL', KEYS[3], id) == 0 then
  return 0
end
redis.call('HDEL', KEYS[3], id .. ':end')
redis.call('ZREM', KEYS[2], id)
if redis.call('HGET', KEYS[1], 'last') == id then
  local newest = redis.call('ZRANGE', KEYS[2], -1, -1)[1]
  if newest then
    redis.call('HSET', KEYS[1], 'last', newest)
  else
    redis.call('HDEL', KEYS[1], 'last')
  end
end
return 1

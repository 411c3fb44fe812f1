-- Cancel a task. Queued and scheduled tasks end at once; a running one is asked to stop (the
-- next heartbeat answer says so) and ends as cancelled when its attempt ends, whatever way.
-- KEYS[1] meta   KEYS[2] ready   KEYS[3] scheduled   KEYS[4] done:cancelled
-- ARGV[1] task id   ARGV[2] now ms   ARGV[3] done channel of this task
-- Returns {'CANCELLED'} | {'REQUESTED'} | {'FINISHED', state} | {'NOTASK'}
local id = ARGV[1]
local t = load_task(KEYS[1], id)
if not t then
  return {'NOTASK'}
end
if t.state == 'running' then
  t.cancel = true
  save_task(KEYS[1], id, t)
  return {'REQUESTED'}
end
if t.state == 'queued' then
  redis.call('ZREM', KEYS[2], t.m)
  t.m = nil
elseif t.state == 'scheduled' then
  redis.call('ZREM', KEYS[3], id)
else
  return {'FINISHED', t.state}
end
t.state = 'cancelled'
t.cancel = true
t.finished = tonumber(ARGV[2])
save_task(KEYS[1], id, t)
redis.call('ZADD', KEYS[4], ARGV[2], id)
redis.call('PUBLISH', ARGV[3], 'cancelled')
return {'CANCELLED'}

-- Enqueue tasks into one queue: all of them, or none.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] ready   KEYS[5] scheduled
-- KEYS[6] seq
-- ARGV[1] now ms   ARGV[2] queue name   ARGV[3] wake channel
-- ARGV[4..] three values per task: id, initial record JSON (name, prio, created, run_at and
--           optional overrides), payload JSON
-- Returns {'OK', state of each task...} | {'NOQUEUE'} | {'EXISTS', id}
-- Publishes the queue name on the wake channel when the ready set stops being empty.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOQUEUE'}
end
local now = tonumber(ARGV[1])
local count = (#ARGV - 3) / 3
for i = 0, count - 1 do
  local id = ARGV[4 + i * 3]
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    return {'EXISTS', id}
  end
end
local was_empty = redis.call('ZCARD', KEYS[4]) == 0
local out = {'OK'}
for i = 0, count - 1 do
  local id = ARGV[4 + i * 3]
  local t = cjson.decode(ARGV[5 + i * 3])
  t.att = 0
  t.hist = 0
  if t.run_at > now then
    t.state = 'scheduled'
    redis.call('ZADD', KEYS[5], int(t.run_at), id)
  else
    make_ready(KEYS[4], KEYS[6], id, t)
  end
  save_task(KEYS[2], id, t)
  redis.call('HSET', KEYS[3], id, ARGV[6 + i * 3])
  out[#out + 1] = t.state
end
if was_empty and redis.call('ZCARD', KEYS[4]) > 0 then
  redis.call('PUBLISH', ARGV[3], ARGV[2])
end
return out

-- Move dead tasks of one queue back to its ready set (an operator's resubmit). Only tasks whose
-- state is 'dead' move; their attempt history (``hist`` and the attempts hash) is kept.
-- KEYS[1] meta   KEYS[2] ready   KEYS[3] seq   KEYS[4] done:dead
-- ARGV[1] now ms   ARGV[2] '1' to start the attempt count again, else '0'
-- ARGV[3] wake channel   ARGV[4] queue name   ARGV[5..] task ids
-- Returns, per id in order: {'OK'} | {'NOTASK'} | {'NOTDEAD', state}
-- Publishes the queue name on the wake channel when the ready set stops being empty.
local now = tonumber(ARGV[1])
local reset = ARGV[2] == '1'
local was_empty = redis.call('ZCARD', KEYS[2]) == 0
local replies = {}
local moved = 0
for i = 5, #ARGV do
  local id = ARGV[i]
  local t = load_task(KEYS[1], id)
  if not t then
    replies[#replies + 1] = {'NOTASK'}
  elseif t.state ~= 'dead' then
    replies[#replies + 1] = {'NOTDEAD', t.state}
  else
    redis.call('ZREM', KEYS[4], id)
    if reset then
      t.att = 0
    end
    t.error = nil
    t.finished = nil
    t.first = nil
    t.cancel = nil
    t.run_at = now
    make_ready(KEYS[2], KEYS[3], id, t)
    save_task(KEYS[1], id, t)
    moved = moved + 1
    replies[#replies + 1] = {'OK'}
  end
end
if was_empty and moved > 0 then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return replies

-- Delete a queue and every task in it, refusing while tasks are unfinished unless forced.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] ready   KEYS[4] scheduled   KEYS[5] running
-- KEYS[6] waiting   KEYS[7..] every other fixed key of the queue
-- ARGV[1] '1' to delete even with unfinished tasks
-- Returns {'OK', task ids...} | {'NOQUEUE'} | {'BUSY', unfinished count}
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'NOQUEUE'}
end
local unfinished = redis.call('ZCARD', KEYS[3]) + redis.call('ZCARD', KEYS[4])
  + redis.call('ZCARD', KEYS[5]) + redis.call('ZCARD', KEYS[6])
if unfinished > 0 and ARGV[1] ~= '1' then
  return {'BUSY', unfinished}
end
local out = redis.call('HKEYS', KEYS[2])
table.insert(out, 1, 'OK')
redis.call('DEL', unpack(KEYS))
return out

-- After the recoverer took a queue in hand and reckoned its next due time: put that time in the
-- global due index. While the queue's entry still holds the mark the recoverer set (a score no
-- due time can have: it has a half ms), nothing was announced since, and the entry becomes the
-- reckoned time, later or earlier, or goes when nothing is due. Otherwise a script announced a
-- time meanwhile (or another recoverer set its own mark), and the entry is only lowered.
-- One key only (the index), so it runs on Redis Cluster whatever slot the queue is on.
-- KEYS[1] the due index (jg:due)
-- ARGV[1] queue name   ARGV[2] the mark   ARGV[3] reckoned due ms, or '' for none
-- ARGV[4] the channel recoverers listen on (told when the entry becomes the earliest)
-- Returns 1 when the entry changed, else 0.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
local marked = score and tonumber(score) == tonumber(ARGV[2])
if ARGV[3] == '' then
  if marked then
    redis.call('ZREM', KEYS[1], ARGV[1])
    return 1
  end
  return 0
end
if marked then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
elseif redis.call('ZADD', KEYS[1], 'LT', 'CH', ARGV[3], ARGV[1]) == 0 then
  return 0
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0)
if first[1] == ARGV[1] then
  redis.call('PUBLISH', ARGV[4], ARGV[3])
end
return 1

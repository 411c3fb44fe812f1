-- After the recoverer took a queue in hand and reckoned its next due time: put that time in the
-- global due index. While the queue's entry still holds the mark the recoverer set (a score no
-- due time can have: it has a half ms), nothing was announced since, and the entry becomes the
-- reckoned time, later or earlier, or goes when nothing is due. Otherwise a script announced a
-- time meanwhile (or another recoverer set its own mark), and the entry is only lowered.
-- On Redis Cluster it has one key only (the index), so it runs whatever slot the queue is on,
-- and the caller reads the queue's ``due`` field after it. On a single Redis it is given the
-- queue hash too, and reads that field itself: a time a script announced after the reckoning,
-- which the mark absorbed, lowers the entry here (gateway/store/tasks/due.py).
-- KEYS[1] the due index (jg:due)   KEYS[2] (single Redis only) the queue hash
-- ARGV[1] queue name   ARGV[2] the mark   ARGV[3] reckoned due ms, or '' for none
-- ARGV[4] the channel recoverers listen on (told when the entry becomes the earliest)
-- Returns 1 when the entry changed, else 0.
local function told(at)
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)
  if first[1] == ARGV[1] then
    redis.call('PUBLISH', ARGV[4], at)
  end
  return 1
end

local function settle()
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
  return told(ARGV[3])
end

local changed = settle()
if KEYS[2] then
  local announced = redis.call('HGET', KEYS[2], 'due')
  if announced and (ARGV[3] == '' or tonumber(announced) < tonumber(ARGV[3]))
      and redis.call('ZADD', KEYS[1], 'LT', 'CH', announced, ARGV[1]) == 1 then
    return told(announced)
  end
end
return changed

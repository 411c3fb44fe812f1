-- Which of some task ids a queue no longer holds: the id index's repair asks it of each queue
-- (gateway/store/index.py). Reads only.
-- KEYS[1] the queue's meta hash
-- ARGV    task ids
-- Returns the ids that have no record.
local gone = {}
for i = 1, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then
    gone[#gone + 1] = ARGV[i]
  end
end
return gone

-- Read one queue's row of the admin UI's queues page (changes nothing): whether it is paused,
-- its tasks in each state, and its finished tasks per time window. One call per queue, so a
-- page of queues is one pipeline whose replies are a few integers each.
-- KEYS[1] queue (policy hash)   KEYS[2] scheduled   KEYS[3] waiting   KEYS[4] ready
-- KEYS[5] running   KEYS[6] done:succeeded   KEYS[7] done:failed   KEYS[8] done:dead
-- KEYS[9] done:cancelled
-- ARGV    window edges in ms, oldest first (none: no throughput)
-- Returns {paused (1 or 0; -1 when the queue does not exist), the size of KEYS[2..9] in order,
--          then for each of KEYS[6..9] in order, its count in each window [ARGV[i], ARGV[i+1])}
local policy = redis.call('HGET', KEYS[1], 'policy')
if not policy then
  return {-1}
end
local paused = cjson.decode(policy).paused
local out = {paused == true and 1 or 0}
for i = 2, 9 do
  out[#out + 1] = redis.call('ZCARD', KEYS[i])
end
for i = 6, 9 do
  for w = 1, #ARGV - 1 do
    out[#out + 1] = redis.call('ZCOUNT', KEYS[i], ARGV[w], '(' .. ARGV[w + 1])
  end
end
return out

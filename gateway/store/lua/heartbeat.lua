-- Keep a running task's lease alive: expiry = max(expiry, now + extension), never past the
-- attempt's hard deadline. Optionally record progress and store a checkpoint.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] running   KEYS[4] checkpoint   KEYS[5] stalls
-- ARGV[1] task id   ARGV[2] lease token   ARGV[3] now ms   ARGV[4] extension ms or ''
-- ARGV[5] progress or ''   ARGV[6] checkpoint JSON or ''
-- Returns {'OK', cancel requested 0|1, lease expiry ms} | {'NOTASK'} | {'STALE', state}
--      or {'NOQUEUE'} (the queue is not registered)
local policy = policy_of(KEYS[1])
if not policy then
  return {'NOQUEUE'}
end
local id = ARGV[1]
local t, refusal = fenced(KEYS[2], id, ARGV[2])
if not t then
  return refusal
end
local now = tonumber(ARGV[3])
local extension = tonumber(ARGV[4])
if not extension then
  extension = t.lease_ms or ms(policy.lease_timeout)
end
t.exp = math.max(t.exp, math.min(now + extension, t.deadline))
t.hb = now
if t.sti then
  redis.call('ZADD', KEYS[5], 'XX', int(now + t.sti), id)
end
if ARGV[5] ~= '' then
  t.progress = tonumber(ARGV[5])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[4], id, ARGV[6])
end
save_task(KEYS[2], id, t)
redis.call('ZADD', KEYS[3], 'XX', int(t.exp), id)
local cancel = 0
if t.cancel then
  cancel = 1
end
return {'OK', cancel, int(t.exp)}

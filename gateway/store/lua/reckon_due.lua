-- Work out when something of this queue is next due, from the queue's own sets, and remember it
-- in the queue hash's ``due`` field (what the global index is told; see the prelude). The
-- recoverer calls it after handling a queue, and for every queue in its slow rescan.
-- KEYS[1] queue hash   KEYS[2] scheduled   KEYS[3] running   KEYS[4] stalls   KEYS[5] dedup expiry
-- KEYS[6] links   KEYS[7] outbox   KEYS[8] done:succeeded   KEYS[9] done:failed
-- KEYS[10] done:dead   KEYS[11] done:cancelled   KEYS[12] calls (durable HTTP calls' leases)
-- ARGV[1] now ms   ARGV[2] sweep interval ms: sweeping (dedup windows, finished tasks past
--         retention) is due no sooner than this long after now, so it comes in batches
-- Returns the due time in ms, or nil when nothing is due ever (or the queue is gone).
local policy = policy_of(KEYS[1])
if not policy then
  return false
end
local now = tonumber(ARGV[1])
local sweep_from = now + tonumber(ARGV[2])
local function first(key)
  local found = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(found[2])
end
local function sweep_at(at)
  if at then
    due_at(math.max(at, sweep_from))
  end
end

local scheduled = first(KEYS[2])
if scheduled then
  due_at(scheduled)
end
local lease = first(KEYS[3])
if lease then
  due_at(lease)
end
if policy.stall_policy == 'redispatch' then
  local stall = first(KEYS[4])
  if stall then
    due_at(stall)
  end
end
local call = first(KEYS[12])
if call then
  due_at(call)
end
local link = first(KEYS[6])
if link then
  due_at(link + RELINK_AFTER_MS)
end
if redis.call('LLEN', KEYS[7]) > 0 then
  due_at(now)
end
sweep_at(first(KEYS[5]))
local succeeded = first(KEYS[8])
if succeeded then
  sweep_at(succeeded + ms(policy.retention_succeeded))
end
for k = 9, 11 do
  local finished = first(KEYS[k])
  if finished then
    sweep_at(finished + ms(policy.retention_failed))
  end
end

if DUE.at == nil then
  redis.call('HDEL', KEYS[1], 'due')
  return false
end
redis.call('HSET', KEYS[1], 'due', int(DUE.at))
return int(DUE.at)

-- Claim a queue's due completion callback notices for delivery, each under a lease: its due
-- time moves to now + lease, so when the gateway delivering it stops, another claims it again
-- then. Each claim counts one try (ntc.n), which fences the settle (notice_settle.lua).
-- A notice whose task is gone (swept, cleaned) or runs again (resubmitted) is dropped.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] result   KEYS[4] notify
-- ARGV[1] now ms   ARGV[2] lease ms   ARGV[3] most notices to claim
-- ARGV[4] a fresh notify secret, kept as the queue's when it has none yet
-- Returns {'OK', the queue's notify secrets to sign with now (the current one, then the
--      previous one while its rotation's overlap lasts, separated by a space), ms when the next
--      notice is due or '', then three values per claimed notice: task id, task record JSON,
--      result JSON or ''}
--   or {'NOQUEUE'} (the queue is not registered)
if redis.call('HEXISTS', KEYS[1], 'policy') == 0 then
  return {'NOQUEUE'}
end
redis.call('HSETNX', KEYS[1], 'notify_secret', ARGV[4])
local now = tonumber(ARGV[1])
local due = now + tonumber(ARGV[2])
local FINAL = {succeeded = true, failed = true, dead = true, cancelled = true}
local signing = redis.call('HMGET', KEYS[1], 'notify_secret', 'notify_previous', 'notify_previous_until')
local secrets = signing[1]
if signing[2] and tonumber(signing[3] or '0') > now then
  secrets = secrets .. ' ' .. signing[2]
end
local out = {'OK', secrets, ''}
local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local t = load_task(KEYS[2], id)
  if not t or not t.ntc or t.ntc.st ~= 'pending' or not FINAL[t.state] then
    redis.call('ZREM', KEYS[4], id)
    if t and t.ntc and not FINAL[t.state] then
      t.ntc = nil
      save_task(KEYS[2], id, t)
    end
  else
    t.ntc.n = t.ntc.n + 1
    t.ntc.due = due
    local encoded = save_task(KEYS[2], id, t)
    redis.call('ZADD', KEYS[4], int(due), id)
    local result = ''
    if t.state == 'succeeded' then
      result = redis.call('HGET', KEYS[3], id) or ''
    end
    out[#out + 1] = id
    out[#out + 1] = encoded
    out[#out + 1] = result
  end
end
local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if first[2] then
  out[3] = first[2]
end
return out

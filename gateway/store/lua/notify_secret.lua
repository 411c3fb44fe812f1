-- A queue's notify secret (signs its completion callbacks), made at first use.
-- KEYS[1] queue hash
-- ARGV[1] a fresh secret, kept when the queue has none yet   ARGV[2] now ms
-- Returns {the secret, ms until which the previous secret still signs beside it, or ''}, or
-- false when the queue is not registered.
if redis.call('HEXISTS', KEYS[1], 'policy') == 0 then
  return false
end
redis.call('HSETNX', KEYS[1], 'notify_secret', ARGV[1])
local found = redis.call('HMGET', KEYS[1], 'notify_secret', 'notify_previous_until')
local until_ms = tonumber(found[2])
if until_ms and until_ms > tonumber(ARGV[2]) then
  return {found[1], found[2]}
end
return {found[1], ''}

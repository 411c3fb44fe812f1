-- A queue's notify secret (signs its completion callbacks), made at first use.
-- KEYS[1] queue hash
-- ARGV[1] a fresh secret, kept when the queue has none yet
-- Returns the secret, or false when the queue is not registered.
if redis.call('HEXISTS', KEYS[1], 'policy') == 0 then
  return false
end
redis.call('HSETNX', KEYS[1], 'notify_secret', ARGV[1])
return redis.call('HGET', KEYS[1], 'notify_secret')

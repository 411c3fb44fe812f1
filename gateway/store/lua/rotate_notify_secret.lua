-- Rotate a queue's notify secret: the new one signs its completion callbacks from now on, and
-- the current one (if any) signs them beside it until a time (notices claimed before then:
-- notice_claim.lua), so receivers can be given the new one while notices keep verifying; an
-- older previous secret is dropped. With no overlap the current one is dropped too, at once: no
-- notice claimed after this script carries it, whatever the claiming gateway's clock says.
-- KEYS[1] queue hash
-- ARGV[1] the new secret   ARGV[2] ms until which the previous one signs too, or 0: not at all
-- Returns 1 when rotated, 0 when the queue is not registered (nothing is written).
if redis.call('HEXISTS', KEYS[1], 'policy') == 0 then
  return 0
end
local current = redis.call('HGET', KEYS[1], 'notify_secret')
if current and tonumber(ARGV[2]) > 0 then
  redis.call('HSET', KEYS[1], 'notify_previous', current, 'notify_previous_until', ARGV[2])
else
  redis.call('HDEL', KEYS[1], 'notify_previous', 'notify_previous_until')
end
redis.call('HSET', KEYS[1], 'notify_secret', ARGV[1])
return 1

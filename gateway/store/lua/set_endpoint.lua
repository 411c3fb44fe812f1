-- Enable or disable an endpoint: a disabled one is claimed for by nobody (claim.lua skips it),
-- its pushes in flight finish normally. Enabling clears the reason it was disabled for.
-- KEYS[1] endpoints
-- ARGV[1] endpoint id   ARGV[2] '1' to enable, '0' to disable   ARGV[3] the reason (disable)
-- Returns 1 when written, 0 when the endpoint is not registered (nothing is written).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return 0
end
local ep = cjson.decode(raw)
if ARGV[2] == '1' then
  ep.enabled = true
  ep.disabled_reason = nil
else
  ep.enabled = false
  ep.disabled_reason = ARGV[3]
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(ep))
return 1

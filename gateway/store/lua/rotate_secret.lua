-- Rotate an endpoint's signing secret: the new one first, the current one kept as the
-- previous until a time (pushes carry both signatures until then); older ones are dropped.
-- KEYS[1] endpoints
-- ARGV[1] endpoint id   ARGV[2] the new secret   ARGV[3] ms until which the previous is sent
-- Returns 1 when rotated, 0 when the endpoint is not registered (nothing is written).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return 0
end
local ep = cjson.decode(raw)
ep.secrets = {ARGV[2], ep.secrets[1]}
ep.previous_until_ms = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(ep))
return 1

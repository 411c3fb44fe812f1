-- Rotate an endpoint's signing secret: the new one first, the current one kept as the
-- previous until a time (pushes claimed before then carry both signatures: claim.lua); older
-- ones are dropped. With no overlap the current one is dropped too, at once: no push claimed
-- after this script carries it, whatever the claiming gateway's clock says.
-- KEYS[1] endpoints
-- ARGV[1] endpoint id   ARGV[2] the new secret
-- ARGV[3] ms until which the previous is sent, or 0: not at all
-- Returns 1 when rotated, 0 when the endpoint is not registered (nothing is written).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return 0
end
local ep = cjson.decode(raw)
local until_ms = tonumber(ARGV[3])
if until_ms > 0 then
  ep.secrets = {ARGV[2], ep.secrets[1]}
  ep.previous_until_ms = until_ms
else
  ep.secrets = {ARGV[2]}
  ep.previous_until_ms = nil
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(ep))
return 1

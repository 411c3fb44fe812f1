-- Claim the durable HTTP calls whose lease expired (the gateway making one stopped, or never
-- had room to start it: gateway/dispatch/calls.py): each is given a new lease (now + its
-- try's timeout + the grace in ARGV[3]) and returned, to be made again by the caller:
-- at-least-once (docs/durable.md, "A durable HTTP call"). An entry whose task no longer waits
-- for a call (resumed, timed out, cancelled, gone) is dropped.
-- KEYS[1] calls   KEYS[2] meta
-- ARGV[1] now ms   ARGV[2] most calls to claim   ARGV[3] grace ms
-- Returns {id, step, request JSON, lease expiry, ...}.
local now = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(due) do
  local t = load_task(KEYS[2], id)
  local wt = t and t.wt
  if wt and wt.k == 'call' and t.state == 'scheduled' then
    local until_ms = now + wt.to + tonumber(ARGV[3])
    redis.call('ZADD', KEYS[1], until_ms, id)
    out[#out + 1] = id
    out[#out + 1] = wt.s
    out[#out + 1] = wt.q
    out[#out + 1] = until_ms
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out

-- Claim up to N ready tasks, leasing each to the enabled endpoint with the fewest pushes in
-- flight that still has room. Push and pull share this script.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] checkpoint   KEYS[5] running
-- KEYS[6] endpoints    KEYS[7] inflight   KEYS[8] ready
-- ARGV[1] now ms   ARGV[2] most tasks wanted   ARGV[3] a fresh secret random seed
-- Lease token i of this claim is sha1(seed:i): unguessable without the seed, which never leaves
-- the gateway, so holding one token reveals nothing of the others.
-- Returns {'OK', {id, endpoint id, record JSON, payload, checkpoint or nil}, ...}
--      or {'NOQUEUE'} | {'PAUSED'} | {'FULL'} (queue concurrency reached) | {'EMPTY'}
--      or {'NOENDPOINT'} (no enabled endpoint with room)
local policy = policy_of(KEYS[1])
if not policy then
  return {'NOQUEUE'}
end
if policy.paused then
  return {'PAUSED'}
end
local room = policy.max_concurrency - redis.call('ZCARD', KEYS[5])
if room <= 0 then
  return {'FULL'}
end
if redis.call('ZCARD', KEYS[8]) == 0 then
  return {'EMPTY'}
end

local endpoints = {}
local raw = redis.call('HGETALL', KEYS[6])
for i = 1, #raw, 2 do
  local ep = cjson.decode(raw[i + 1])
  if ep.enabled then
    local busy = tonumber(redis.call('HGET', KEYS[7], raw[i]) or '0')
    if busy < ep.concurrency then
      endpoints[#endpoints + 1] = {id = raw[i], busy = busy, limit = ep.concurrency}
    end
  end
end

local now = tonumber(ARGV[1])
local lease_default = ms(policy.lease_timeout)
local run_default = ms(policy.max_run_time)
local out = {'OK'}
for i = 1, math.min(tonumber(ARGV[2]), room) do
  local best = nil
  for _, e in ipairs(endpoints) do
    if e.busy < e.limit and (best == nil or e.busy < best.busy) then
      best = e
    end
  end
  if best == nil then
    break
  end
  local popped = redis.call('ZPOPMIN', KEYS[8])
  if #popped == 0 then
    break
  end
  local id = member_id(popped[1])
  local t = load_task(KEYS[2], id)
  if t then
    t.m = nil
    t.att = t.att + 1
    t.state = 'running'
    t.lease = redis.sha1hex(ARGV[3] .. ':' .. i)
    t.ep = best.id
    t.started = now
    t.hb = nil
    t.progress = nil
    t.first = t.first or now
    t.deadline = now + (t.run_ms or run_default)
    t.exp = math.min(now + (t.lease_ms or lease_default), t.deadline)
    local encoded = save_task(KEYS[2], id, t)
    redis.call('ZADD', KEYS[5], int(t.exp), id)
    redis.call('HINCRBY', KEYS[7], best.id, 1)
    best.busy = best.busy + 1
    out[#out + 1] = {
      id, best.id, encoded, redis.call('HGET', KEYS[3], id), redis.call('HGET', KEYS[4], id)
    }
  end
end
if #out == 1 then
  return {'NOENDPOINT'}
end
return out

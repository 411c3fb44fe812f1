-- Claim up to N ready tasks, leasing each to the enabled endpoint with the fewest pushes in
-- flight that still has room, can take the task's capability, and whose circuit is not open.
-- Push and pull share this script.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] checkpoint   KEYS[5] running
-- KEYS[6] endpoints    KEYS[7] inflight   KEYS[8] ready   KEYS[9] singleton   KEYS[10] stalls
-- ARGV[1] now ms   ARGV[2] most tasks wanted   ARGV[3] a fresh secret random seed
-- Lease token i of this claim is sha1(seed:i): unguessable without the seed, which never leaves
-- the gateway, so holding one token reveals nothing of the others.
-- The queue's rate limit is a token bucket in the queue hash (fields rl_tokens, rl_at), shared
-- by every gateway.
-- Returns {'OK', {id, endpoint id, record JSON, payload, checkpoint or nil}, ...}
--      or {'NOQUEUE'} | {'PAUSED'} | {'FULL'} (queue concurrency reached) | {'EMPTY'}
--      or {'RATE', ms until a dispatch is allowed}
--      or {'NOENDPOINT', ms when an open circuit allows a probe, or ''} (no endpoint with room
--         takes the waiting tasks)
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
local now = tonumber(ARGV[1])
local wanted = math.min(tonumber(ARGV[2]), room)

local rate = policy.rate_limit
local tokens = 0
if rate and rate ~= cjson.null then
  local per_ms = rate.per_second / 1000
  local saved = redis.call('HMGET', KEYS[1], 'rl_tokens', 'rl_at')
  tokens = tonumber(saved[1]) or rate.burst
  local since = math.max(0, now - (tonumber(saved[2]) or now))
  tokens = math.min(rate.burst, tokens + since * per_ms)
  if tokens < 1 then
    redis.call('HSET', KEYS[1], 'rl_tokens', tostring(tokens), 'rl_at', int(now))
    return {'RATE', math.ceil((1 - tokens) / per_ms)}
  end
  wanted = math.min(wanted, math.floor(tokens))
else
  rate = nil
end

-- Endpoints that may take a push now, and the capabilities they cover.
local endpoints = {}
local caps = {['/'] = true}
local probe_at = nil
local raw = redis.call('HGETALL', KEYS[6])
for i = 1, #raw, 2 do
  local ep = cjson.decode(raw[i + 1])
  if ep.enabled then
    local busy = tonumber(redis.call('HGET', KEYS[7], raw[i]) or '0')
    local limit = ep.concurrency
    local probing = false
    if ep.open_until == cjson.null then
      ep.open_until = nil
    end
    if ep.open_until then
      if now < ep.open_until then
        limit = 0
        probe_at = math.min(probe_at or ep.open_until, ep.open_until)
      elseif ep.probe then
        limit = 0
      else
        limit = math.min(limit, busy + 1)
        probing = true
      end
    end
    if busy < limit then
      local has = {}
      for _, c in ipairs(ep.capabilities or {}) do
        has[c] = true
        caps[c .. '/'] = true
      end
      endpoints[#endpoints + 1] = {
        id = raw[i], busy = busy, limit = limit, has = has, probing = probing, record = ep,
      }
    end
  end
end

-- The head of each capability's part of the ready set that some endpoint can take.
local heads = {}
local function refresh(prefix)
  local cap = string.sub(prefix, 1, -2)
  heads[prefix] = ready_head(KEYS[8], cap ~= '' and cap or nil)
end
for prefix in pairs(caps) do
  refresh(prefix)
end

local lease_default = ms(policy.lease_timeout)
local run_default = ms(policy.max_run_time)
local stall_default = policy.max_heartbeat_interval
if stall_default == cjson.null then
  stall_default = nil
end
local out = {'OK'}
for i = 1, wanted do
  -- The best ready task some endpoint with room can take.
  local best_prefix, best_key = nil, nil
  for prefix, member in pairs(heads) do
    if member then
      local key = string.sub(member, #prefix + 1)
      if best_key == nil or key < best_key then
        local cap = string.sub(prefix, 1, -2)
        for _, e in ipairs(endpoints) do
          if e.busy < e.limit and (cap == '' or e.has[cap]) then
            best_prefix, best_key = prefix, key
            break
          end
        end
      end
    end
  end
  if best_prefix == nil then
    break
  end
  local cap = string.sub(best_prefix, 1, -2)
  local best = nil
  for _, e in ipairs(endpoints) do
    if e.busy < e.limit and (cap == '' or e.has[cap]) and (best == nil or e.busy < best.busy) then
      best = e
    end
  end
  local member = heads[best_prefix]
  redis.call('ZREM', KEYS[8], member)
  refresh(best_prefix)
  local id = member_id(member)
  local t = load_task(KEYS[2], id)
  if t then
    if t.sk and redis.call('HGET', KEYS[9], t.sk) == id then
      redis.call('HDEL', KEYS[9], t.sk)
    end
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
    t.sti = t.hbi or (stall_default and ms(stall_default))
    if t.sti then
      redis.call('ZADD', KEYS[10], int(now + t.sti), id)
    end
    local encoded = save_task(KEYS[2], id, t)
    redis.call('ZADD', KEYS[5], int(t.exp), id)
    redis.call('HINCRBY', KEYS[7], best.id, 1)
    best.busy = best.busy + 1
    if best.probing then
      best.record.probe = true
      best.limit = best.busy
      redis.call('HSET', KEYS[6], best.id, cjson.encode(best.record))
    end
    if rate then
      tokens = tokens - 1
    end
    out[#out + 1] = {
      id, best.id, encoded, redis.call('HGET', KEYS[3], id), redis.call('HGET', KEYS[4], id)
    }
  end
end
if rate then
  redis.call('HSET', KEYS[1], 'rl_tokens', tostring(tokens), 'rl_at', int(now))
end
-- Due times (see the prelude): the earliest lease expiry, and stall deadline when stalls are
-- redispatched.
if #out > 1 then
  due_first(KEYS[5])
  if policy.stall_policy == 'redispatch' then
    due_first(KEYS[10])
  end
end
if #out == 1 then
  return {'NOENDPOINT', probe_at and int(probe_at) or ''}
end
return out

-- Claim up to N ready tasks, leasing each to an enabled endpoint that still has room, can take
-- the task's capability, and whose circuit is not open: the cheapest by health_weight (pushes
-- in flight x answer time x error share, see health.lua), and for a retry one other than the
-- endpoint that failed the attempt before (t.lep) whenever another can take it.
-- Push and pull share this script: the dispatcher passes no endpoint (ARGV[4] '') and never
-- picks a pull endpoint; a pull worker's lease request passes its endpoint id, the only
-- candidate then (and only if it is a pull endpoint). Every other limit is the same.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] checkpoint   KEYS[5] running
-- KEYS[6] endpoints    KEYS[7] inflight   KEYS[8] ready   KEYS[9] singleton   KEYS[10] stalls
-- KEYS[11] health
-- ARGV[1] now ms   ARGV[2] most tasks wanted   ARGV[3] a fresh secret random seed
-- ARGV[4] the pull endpoint leasing, or '' for the push dispatcher
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
local healths = {}
local fastest = nil
local puller = ARGV[4]
local raw
if puller == '' then
  raw = redis.call('HGETALL', KEYS[6])
else
  raw = {puller, redis.call('HGET', KEYS[6], puller)}
  if not raw[2] then
    raw = {}
  end
end
for i = 1, #raw, 2 do
  local ep = cjson.decode(raw[i + 1])
  if ep.enabled and (ep.pull == true) == (puller ~= '') then
    local busy = tonumber(redis.call('HGET', KEYS[7], raw[i]) or '0')
    local limit = ep.concurrency
    local probing = false
    local h = health_of(healths, KEYS[11], raw[i])
    if h.open_until then
      if now < h.open_until then
        limit = 0
        probe_at = math.min(probe_at or h.open_until, h.open_until)
      elseif h.probe then
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
        id = raw[i], busy = busy, limit = limit, has = has, probing = probing, health = h,
      }
      local lat = health_faded(h, now)
      if lat and (fastest == nil or lat < fastest) then
        fastest = lat
      end
    end
  end
end
-- An endpoint with no answer time yet is taken to be as fast as the fastest known one.
for _, e in ipairs(endpoints) do
  e.weight = health_weight(e.health, now, fastest or 0)
end

-- The endpoint for a task needing ``cap``: the cheapest with room, avoiding ``avoid`` (the one
-- that failed its last attempt) unless no other can take it.
local function choose(cap, avoid)
  local best, best_cost, fallback = nil, nil, nil
  for _, e in ipairs(endpoints) do
    if e.busy < e.limit and (cap == '' or e.has[cap]) then
      local cost = (e.busy + 1) * e.weight
      if e.id == avoid then
        fallback = e
      elseif best == nil or cost < best_cost then
        best, best_cost = e, cost
      end
    end
  end
  return best or fallback
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
  local member = heads[best_prefix]
  redis.call('ZREM', KEYS[8], member)
  refresh(best_prefix)
  local id = member_id(member)
  local t = load_task(KEYS[2], id)
  if t then
    local best = choose(string.sub(best_prefix, 1, -2), t.lep)
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
    t.acc = nil
    t.pr = best.probing or nil
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
      best.health.probe = true
      best.health.dirty = true
      best.limit = best.busy
      best.probing = false
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
health_save(healths, KEYS[11])
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

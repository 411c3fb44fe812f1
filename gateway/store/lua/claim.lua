-- Claim up to N ready tasks, leasing each to an enabled endpoint that still has room, can take
-- the task's capability, and whose circuit is not open: the cheapest by health_weight (pushes
-- in flight x answer time x error share, see health.lua), and for a retry one other than the
-- endpoint that failed the attempt before (t.lep) whenever another can take it.
-- Push and pull share this script: the dispatcher passes no endpoint (ARGV[4] '') and never
-- picks a pull endpoint; a pull worker's lease request passes its endpoint id, the only
-- candidate then (and only if it is a pull endpoint). Every other limit is the same.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] checkpoint   KEYS[5] running
-- KEYS[6] endpoints    KEYS[7] inflight   KEYS[8] ready   KEYS[9] singleton   KEYS[10] stalls
-- KEYS[11] health   KEYS[12] rates (per-name and per-key token buckets)   KEYS[13] rates_full
-- KEYS[14] steps
-- ARGV[1] now ms   ARGV[2] most tasks wanted   ARGV[3] a fresh secret random seed
-- ARGV[4] the pull endpoint leasing, or '' for the push dispatcher
-- Lease token i of this claim is sha1(seed:i): unguessable without the seed, which never leaves
-- the gateway, so holding one token reveals nothing of the others.
-- The queue's rate limit is a token bucket in the queue hash (fields rl_tokens, rl_at), shared
-- by every gateway. The per-name and per-key limits are described where they are checked.
-- Returns {'OK', settled, {id, endpoint id, record JSON, payload, checkpoint or nil,
--         the endpoint's signing secrets now[, its durable steps' JSON list]}, ...}
--         (the steps only for a task whose record has the ``stp`` flag: step.lua)
--         where settled is '1' when no ready task is left that an endpoint with room can take,
--         whether the claim stopped for that or took all it wanted (claiming again now would
--         find nothing: wait for a change), else ''; the signing secrets are the endpoint's
--         current one, then its previous one while its rotation's overlap lasts
--         (rotate_secret.lua), separated by a space: chosen here, by the claim's own time, so
--         that no push claimed once the overlap ended carries the previous one
--      or {'NOQUEUE'} | {'PAUSED'} | {'FULL'} (queue concurrency reached) | {'EMPTY'}
--      or {'RATE', ms until a dispatch is allowed} (the queue's bucket is empty)
--      or {'RATE', ms, 'held'} (every task looked at waits for a per-name or per-key bucket: a
--         new task of another name or key may go sooner)
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

-- The secrets a push claimed now is signed with (see the header).
local function signing_of(ep)
  local signing = ep.secrets[1]
  if ep.secrets[2] and type(ep.previous_until_ms) == 'number' and now < ep.previous_until_ms then
    signing = signing .. ' ' .. ep.secrets[2]
  end
  return signing
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
        signing = signing_of(ep),
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
-- ``after``: the member just taken or skipped; the head moves past it, so a skipped task keeps
-- its place in the ready set without being looked at twice.
-- The members are read ``k`` at a time (as many as the claim may still take) into ``bufs``,
-- and their records in one HMGET when the first of them is looked at: nothing in the loop
-- below writes the ready set or a record (a member with no record is removed, behind the head),
-- so what was read stays true until the loop ends, and a claim of 32 costs two commands where
-- it cost 64.
local heads = {}
local bufs = {}  -- prefix -> {m = members read, i = the next one, k = how many asked, r = records}
local function refresh(prefix, after, k)
  local b = bufs[prefix]
  if b and b.i <= #b.m then
    heads[prefix] = b.m[b.i]
    b.i = b.i + 1
    return
  end
  if b and #b.m < b.k then  -- the last read reached the end of this capability's part
    heads[prefix] = nil
    return
  end
  local cap = string.sub(prefix, 1, -2)
  local from = after and ('(' .. after) or ('[' .. prefix)
  local m = redis.call('ZRANGEBYLEX', KEYS[8], from, '(' .. cap .. '0', 'LIMIT', 0, k)
  bufs[prefix] = {m = m, i = 2, k = k}
  heads[prefix] = m[1]
end
-- How many the claim may still take: no more than it wants, nor than its endpoints have room
-- for (a full endpoint's claim of one must not read 64 members and records).
local ep_room = 0
for _, e in ipairs(endpoints) do
  ep_room = ep_room + math.max(0, e.limit - e.busy)
end
local function chunk(taken)
  return math.max(1, math.min(wanted, ep_room) - taken)
end
for prefix in pairs(caps) do
  refresh(prefix, nil, chunk(0))
end

-- The record of ``id``, the head of ``prefix``'s part.
local function record_of(prefix, id)
  local b = bufs[prefix]
  if not b.r and b.i > #b.m then  -- the head is the last member read: one HGET, no tables
    return load_task(KEYS[2], id)
  end
  if not b.r then
    local ids = {}
    for j = b.i - 1, #b.m do
      ids[#ids + 1] = member_id(b.m[j])
    end
    local raw = redis.call('HMGET', KEYS[2], unpack(ids))
    b.r = {}
    for j, rid in ipairs(ids) do
      b.r[rid] = raw[j]
    end
  end
  local raw = b.r[id]
  if raw == nil then
    return load_task(KEYS[2], id)
  end
  return decode_task(raw)
end

local lease_default = ms(policy.lease_timeout)
local run_default = ms(policy.max_run_time)
local stall_default = policy.max_heartbeat_interval
if stall_default == cjson.null then
  stall_default = nil
end
-- Per-name and per-key rate limits (policy.task_rate_limits, policy.key_rate_limit; the key is
-- the record's rk, read from the payload at enqueue): a token bucket each, the field
-- 'n:<name>' or 'k:<key>' of KEYS[12] holding '<tokens>:<ms>'. A task whose bucket is empty
-- stays ready, in its place, and the claim looks at the next one; at most skip_cap such tasks
-- per claim, so a flood of one key costs a bounded scan. Without these limits nothing below
-- runs but two nil checks.
local by_name = policy.task_rate_limits
if by_name == nil or by_name == cjson.null or next(by_name) == nil then
  by_name = nil
end
local by_key = policy.key_rate_limit
if by_key == cjson.null then
  by_key = nil
end
local buckets = {}
local rate_wait = nil
local skipped = 0
local skip_cap = 4 * wanted + 64

local function bucket(field, limit)
  local b = buckets[field]
  if not b then
    local per_ms = limit.per_second / 1000
    local tokens, at = limit.burst, now
    local saved = redis.call('HGET', KEYS[12], field)
    if saved then
      local sep = string.find(saved, ':', 1, true)
      tokens = tonumber(string.sub(saved, 1, sep - 1))
      at = tonumber(string.sub(saved, sep + 1))
    end
    tokens = math.min(limit.burst, tokens + math.max(0, now - at) * per_ms)
    b = {per_ms = per_ms, burst = limit.burst, tokens = tokens, taken = false}
    buckets[field] = b
  end
  return b
end

-- Takes a token from each of the task's buckets when each has one. Otherwise takes none and
-- notes when this task could go (its emptiest bucket), keeping the earliest over the claim.
local function admit(t)
  local limit = by_name and by_name[t.name]
  local mine = {}
  if limit then
    mine[#mine + 1] = bucket('n:' .. t.name, limit)
  end
  if by_key and t.rk then
    mine[#mine + 1] = bucket('k:' .. t.rk, by_key)
  end
  local wait = 0
  for _, b in ipairs(mine) do
    if b.tokens < 1 then
      -- (less a hair, so float error in the refill cannot add a millisecond)
      wait = math.max(wait, 1, math.ceil((1 - b.tokens) / b.per_ms - 1e-6))
    end
  end
  if wait > 0 then
    rate_wait = math.min(rate_wait or wait, wait)
    return false
  end
  for _, b in ipairs(mine) do
    b.tokens = b.tokens - 1
    b.taken = true
  end
  return true
end

-- Writes the buckets tokens were taken from, each with the time it is full again (when it may
-- as well not exist), drops a few that are full by now, and lets both keys expire when the
-- last bucket is full.
local function save_buckets()
  local wrote = false
  for field, b in pairs(buckets) do
    if b.taken then
      redis.call('HSET', KEYS[12], field, tostring(b.tokens) .. ':' .. int(now))
      redis.call('ZADD', KEYS[13], int(now + math.ceil((b.burst - b.tokens) / b.per_ms - 1e-6)), field)
      wrote = true
    end
  end
  if not wrote then
    return
  end
  local full = redis.call('ZRANGEBYSCORE', KEYS[13], '-inf', int(now), 'LIMIT', 0, 16)
  if #full > 0 then
    redis.call('HDEL', KEYS[12], unpack(full))
    redis.call('ZREM', KEYS[13], unpack(full))
  end
  -- Relative, like every expiry here: the clock in ARGV need not be the server's own.
  local last = redis.call('ZRANGE', KEYS[13], -1, -1, 'WITHSCORES')
  local left = int(tonumber(last[2]) - now)
  redis.call('PEXPIRE', KEYS[12], left)
  redis.call('PEXPIRE', KEYS[13], left)
end

-- The writes of the tasks taken are gathered and made once each after the loop (one command
-- per key rather than per task): nothing in the loop reads them back.
local out = {'OK', ''}
local n = 0
local taken, records, leased, stalled, ids = {}, {}, {}, {}, {}
local added = {}  -- endpoint id -> pushes added
-- The prefix of the best ready task some endpoint with room can take, or nil.
local function best_head()
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
  return best_prefix
end
while n < wanted do
  local best_prefix = best_head()
  if best_prefix == nil then
    out[2] = '1'
    break
  end
  local member = heads[best_prefix]
  local id = member_id(member)
  local t = record_of(best_prefix, id)
  refresh(best_prefix, member, chunk(n + 1))
  if t and (by_name or by_key) and not admit(t) then
    skipped = skipped + 1
    if skipped >= skip_cap then
      break
    end
  elseif t then
    taken[#taken + 1] = member
    n = n + 1
    local best = choose(string.sub(best_prefix, 1, -2), t.lep)
    if t.sk and redis.call('HGET', KEYS[9], t.sk) == id then
      redis.call('HDEL', KEYS[9], t.sk)
    end
    left_ready(t)
    t.att = t.att + 1
    t.state = 'running'
    t.lease = redis.sha1hex(ARGV[3] .. ':' .. n)
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
      stalled[#stalled + 1] = int(now + t.sti)
      stalled[#stalled + 1] = id
    end
    local encoded = task_json(t)
    records[#records + 1] = id
    records[#records + 1] = encoded
    leased[#leased + 1] = int(t.exp)
    leased[#leased + 1] = id
    ids[n] = id
    added[best.id] = (added[best.id] or 0) + 1
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
    out[#out + 1] = {id, best.id, encoded, false, false, best.signing}
    if t.stp then
      out[#out][7] = redis.call('HGET', KEYS[14], id)
    end
  else
    redis.call('ZREM', KEYS[8], member)
  end
end
-- Took all it wanted: settled too when nothing it could take is left (the heads are already
-- past the last task taken), so a caller does not claim again only to find nothing.
if n == wanted and best_head() == nil then
  out[2] = '1'
end
if n > 0 then
  redis.call('ZREM', KEYS[8], unpack(taken))
  redis.call('HSET', KEYS[2], unpack(records))
  redis.call('ZADD', KEYS[5], unpack(leased))
  if #stalled > 0 then
    redis.call('ZADD', KEYS[10], unpack(stalled))
  end
  for endpoint, count in pairs(added) do
    redis.call('HINCRBY', KEYS[7], endpoint, count)
  end
  local payloads = redis.call('HMGET', KEYS[3], unpack(ids))
  local checkpoints = redis.call('HMGET', KEYS[4], unpack(ids))
  for i = 1, n do
    out[i + 2][4] = payloads[i]
    out[i + 2][5] = checkpoints[i]
  end
end
save_buckets()
if rate then
  redis.call('HSET', KEYS[1], 'rl_tokens', tostring(tokens), 'rl_at', int(now))
end
health_save(healths, KEYS[11])
-- Due times (see the prelude): the earliest lease expiry, and stall deadline when stalls are
-- redispatched.
if n > 0 then
  due_first(KEYS[5])
  if policy.stall_policy == 'redispatch' then
    due_first(KEYS[10])
  end
end
-- Tasks held by a rate bucket or an open circuit's probe time go at a time of their own, which
-- the caller learns by claiming again: not settled then.
if rate_wait or probe_at then
  out[2] = ''
end
if n == 0 and rate_wait then
  return {'RATE', rate_wait, 'held'}
end
if n == 0 then
  return {'NOENDPOINT', probe_at and int(probe_at) or ''}
end
return out

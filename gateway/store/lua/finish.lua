-- End the current attempt of running tasks, each fenced by its lease token, and move each on:
-- succeeded; retried after a delay; back to the queue untouched; failed (or dead); cancelled.
-- Many ends in one call (a batch of answers); each is decided on its own.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] result   KEYS[4] attempts   KEYS[5] running
-- KEYS[6] inflight     KEYS[7] ready   KEYS[8] scheduled   KEYS[9] seq   KEYS[10] endpoints
-- KEYS[11] done:succeeded   KEYS[12] done:failed   KEYS[13] done:dead   KEYS[14] done:cancelled
-- KEYS[15] waiting   KEYS[16] dependents   KEYS[17] groups   KEYS[18] outbox   KEYS[19] stalls
-- ARGV[1] now ms   ARGV[2] done channel prefix (the task id is appended)   ARGV[3] queue name
-- ARGV[4..] seven values per task:
--   task id, lease token,
--   outcome: succeeded | error (retryable) | failed (not retryable) | busy (429/503) |
--            gone (410) | expired (lease ran out) | stalled (heartbeats stopped) |
--            released (the worker gave it back),
--   HTTP status or '', result JSON when succeeded else error text or '', traceback or '',
--   delay ms before the retry (error, busy, expired)
-- Returns, per task: {'OK', new state, due ms or ''} | {'NOTASK'} | {'STALE', state}
--      or {'ALIVE'} (outcome expired or stalled, but a heartbeat came meanwhile)
-- Each end also feeds the endpoint's circuit breaker, and a final state settles the task's
-- dependents (in this queue at once; in other queues through the outbox) and its group.
local now = tonumber(ARGV[1])
local policy = policy_of(KEYS[1])
local CHANNEL = ARGV[2]
local Q = {
  name = ARGV[3], policy = policy, meta = KEYS[2],
  ready = KEYS[7], seq = KEYS[9], scheduled = KEYS[8], waiting = KEYS[15],
  dependents = KEYS[16], groups = KEYS[17], outbox = KEYS[18], failed = KEYS[12],
  dead = KEYS[13], channel = CHANNEL, now = now,
}
local ended = {}
local breaker = policy.circuit_breaker or {failures = 5, open_for = 5, max_open_for = 300}
local HEALTHY = {succeeded = true, failed = true}
local UNHEALTHY = {error = true, expired = true, stalled = true}

-- Feed an endpoint's circuit breaker with the end of one push.
local function count_push(ep_id, raw, outcome)
  local healthy = HEALTHY[outcome]
  if not healthy and not UNHEALTHY[outcome] then
    return
  end
  local ep = cjson.decode(raw)
  if ep.open_until == cjson.null then
    ep.open_until = nil
  end
  if healthy then
    if (ep.fails or 0) == 0 and not ep.open_until then
      return
    end
    ep.fails, ep.open_until, ep.opens, ep.probe = 0, nil, nil, nil
  else
    ep.fails = (ep.fails or 0) + 1
    if ep.probe or (not ep.open_until and ep.fails >= breaker.failures) then
      local pause = ms(breaker.open_for) * math.pow(2, ep.opens or 0)
      ep.open_until = now + math.min(pause, ms(breaker.max_open_for))
      ep.opens = (ep.opens or 0) + 1
      ep.probe = nil
    end
  end
  redis.call('HSET', KEYS[10], ep_id, cjson.encode(ep))
end

local function finish_one(id, token, outcome, status, text, traceback, delay_ms)
  local t, refusal = fenced(KEYS[2], id, token)
  if not t then
    if refusal[1] == 'NOTASK' or refusal[2] ~= 'running' then
      -- Nothing running has this id: an entry left in the running index is garbage, and would
      -- otherwise stop expiry scans that read the index in order.
      redis.call('ZREM', KEYS[5], id)
    end
    return refusal
  end
  if outcome == 'expired' and t.exp > now then
    return {'ALIVE'}
  end
  if outcome == 'stalled' and (not t.sti or (t.hb or t.started) + t.sti > now) then
    return {'ALIVE'}
  end

  redis.call('ZREM', KEYS[5], id)
  redis.call('ZREM', KEYS[19], id)
  local endpoint = redis.call('HGET', KEYS[10], t.ep)
  if endpoint then
    redis.call('HINCRBY', KEYS[6], t.ep, -1)
    count_push(t.ep, endpoint, outcome)
    endpoint = redis.call('HGET', KEYS[10], t.ep)
  end

  local attempt = {n = t.att, ep = t.ep, started = t.started, ended = now, outcome = outcome}
  if status ~= '' then
    attempt.status = tonumber(status)
  end
  if outcome ~= 'succeeded' and text ~= '' then
    attempt.error = text
    t.error = text
  end
  if traceback ~= '' then
    attempt.tb = traceback
  end
  t.hist = t.hist + 1
  redis.call('HSET', KEYS[4], id .. ':' .. t.hist, cjson.encode(attempt))

  local next_state
  if outcome == 'succeeded' then
    next_state = 'succeeded'
  elseif t.cancel then
    next_state = 'cancelled'
  elseif outcome == 'failed' then
    next_state = 'failed'
  elseif outcome == 'gone' or outcome == 'released' then
    next_state = 'requeue'
  elseif outcome == 'busy' and now - t.first < ms(policy.max_retry_duration) then
    next_state = 'retry'
  elseif t.att >= (t.max_att or policy.max_attempts) then
    next_state = 'failed'
  else
    next_state = 'retry'
  end
  if next_state == 'failed' and policy.dead_letter then
    next_state = 'dead'
  end
  -- A busy worker or a vanished endpoint does not spend an attempt.
  if outcome == 'gone' or outcome == 'released' or (outcome == 'busy' and next_state == 'retry') then
    t.att = t.att - 1
  end
  if outcome == 'gone' and endpoint then
    local ep = cjson.decode(endpoint)
    ep.enabled = false
    ep.disabled_reason = 'answered 410 Gone'
    redis.call('HSET', KEYS[10], t.ep, cjson.encode(ep))
  end

  t.lease = nil
  t.exp = nil
  t.deadline = nil
  t.ep = nil
  t.sti = nil
  local due = ''
  if next_state == 'retry' or next_state == 'requeue' then
    local delay = tonumber(delay_ms) or 0
    if next_state == 'retry' then
      t.run_at = now + delay
    end
    if t.run_at > now then
      t.state = 'scheduled'
      redis.call('ZADD', KEYS[8], int(t.run_at), id)
      due_at(t.run_at)
      due = int(t.run_at)
    else
      make_ready(KEYS[7], KEYS[9], id, t)
    end
  else
    t.state = next_state
    t.finished = now
    if next_state == 'succeeded' then
      redis.call('HSET', KEYS[3], id, text)
    end
    local index = {succeeded = KEYS[11], failed = KEYS[12], dead = KEYS[13], cancelled = KEYS[14]}
    redis.call('ZADD', index[next_state], int(now), id)
    redis.call('PUBLISH', CHANNEL .. id, next_state)
    ended[#ended + 1] = {id, next_state == 'succeeded', t.error or next_state, t.grp}
  end
  save_task(KEYS[2], id, t)
  return {'OK', t.state, due}
end

local replies = {}
for i = 4, #ARGV, 7 do
  replies[#replies + 1] = finish_one(
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  )
end
settle_all(Q, ended)
return replies

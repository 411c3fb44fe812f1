-- End the current attempt of a running task, fenced by its lease token, and move the task on:
-- succeeded; retried after a delay; back to the queue untouched; failed (or dead); cancelled.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] result   KEYS[4] attempts   KEYS[5] running
-- KEYS[6] inflight     KEYS[7] ready   KEYS[8] scheduled   KEYS[9] seq   KEYS[10] endpoints
-- KEYS[11] done:succeeded   KEYS[12] done:failed   KEYS[13] done:dead   KEYS[14] done:cancelled
-- ARGV[1] task id   ARGV[2] lease token   ARGV[3] now ms
-- ARGV[4] outcome: succeeded | error (retryable) | failed (not retryable) | busy (429/503) |
--         gone (410) | expired (lease ran out)
-- ARGV[5] HTTP status or ''   ARGV[6] result JSON when succeeded, else error text or ''
-- ARGV[7] traceback or ''   ARGV[8] delay ms before the retry (error, busy, expired)
-- ARGV[9] done channel of this task
-- Returns {'OK', new state, due ms or ''} | {'NOTASK'} | {'STALE', state}
--      or {'ALIVE'} (outcome expired, but a heartbeat extended the lease meanwhile)
local id = ARGV[1]
local t, refusal = fenced(KEYS[2], id, ARGV[2])
if not t then
  if refusal[1] == 'NOTASK' or refusal[2] ~= 'running' then
    -- Nothing running has this id: an entry left in the running index is garbage, and would
    -- otherwise stop expiry scans that read the index in order.
    redis.call('ZREM', KEYS[5], id)
  end
  return refusal
end
local now = tonumber(ARGV[3])
local outcome = ARGV[4]
if outcome == 'expired' and t.exp > now then
  return {'ALIVE'}
end
local policy = policy_of(KEYS[1])

redis.call('ZREM', KEYS[5], id)
local endpoint = redis.call('HGET', KEYS[10], t.ep)
if endpoint then
  redis.call('HINCRBY', KEYS[6], t.ep, -1)
end

local attempt = {n = t.att, ep = t.ep, started = t.started, ended = now, outcome = outcome}
if ARGV[5] ~= '' then
  attempt.status = tonumber(ARGV[5])
end
if outcome ~= 'succeeded' and ARGV[6] ~= '' then
  attempt.error = ARGV[6]
  t.error = ARGV[6]
end
if ARGV[7] ~= '' then
  attempt.tb = ARGV[7]
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
elseif outcome == 'gone' then
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
if outcome == 'gone' or (outcome == 'busy' and next_state == 'retry') then
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
local due = ''
if next_state == 'retry' or next_state == 'requeue' then
  local delay = tonumber(ARGV[8]) or 0
  if next_state == 'retry' then
    t.run_at = now + delay
  end
  if t.run_at > now then
    t.state = 'scheduled'
    redis.call('ZADD', KEYS[8], int(t.run_at), id)
    due = int(t.run_at)
  else
    make_ready(KEYS[7], KEYS[9], id, t)
  end
else
  t.state = next_state
  t.finished = now
  if next_state == 'succeeded' then
    redis.call('HSET', KEYS[3], id, ARGV[6])
  end
  local index = {succeeded = KEYS[11], failed = KEYS[12], dead = KEYS[13], cancelled = KEYS[14]}
  redis.call('ZADD', index[next_state], int(now), id)
  redis.call('PUBLISH', ARGV[9], next_state)
end
save_task(KEYS[2], id, t)
return {'OK', t.state, due}

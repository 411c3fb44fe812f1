-- End the current attempt of running tasks, each fenced by its lease token, and move each on:
-- succeeded; retried after a delay; back to the queue untouched; failed (or dead); cancelled
-- (a cancel was requested and the attempt ended any way but succeeded: see ``cancelled`` below).
-- Many ends in one call (a batch of answers); each is decided on its own.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] result   KEYS[4] attempts   KEYS[5] running
-- KEYS[6] inflight     KEYS[7] ready   KEYS[8] scheduled   KEYS[9] seq   KEYS[10] endpoints
-- KEYS[11] done:succeeded   KEYS[12] done:failed   KEYS[13] done:dead   KEYS[14] done:cancelled
-- KEYS[15] waiting   KEYS[16] dependents   KEYS[17] groups   KEYS[18] outbox   KEYS[19] stalls
-- KEYS[20] health   KEYS[21] notify   KEYS[22] key_counts (per-key concurrency: key_limits.lua)
-- ARGV[1] now ms   ARGV[2] done channel prefix (the task id is appended)   ARGV[3] queue name
-- ARGV[4] wake channel: told ARGV[5] when an attempt ended (room on its endpoint) while
--         ready tasks wait, so every gateway's dispatcher may claim, not only this one's
-- ARGV[5] the wake message: the queue name, or '<queue>  <gateway>' from a gateway's
--         dispatcher, which acts on the READY marker itself (gateway/store/pubsub.py)
-- ARGV[6..] nine values per task:
--   task id, lease token,
--   outcome: succeeded | error (retryable) | failed (not retryable) | busy (429/503) |
--            gone (410) | expired (lease ran out) | stalled (heartbeats stopped) |
--            released (the worker gave it back),
--   HTTP status or '', result JSON when succeeded else error text or '',
--   traceback or '' (when succeeded: the worker's warning or ''),
--   delay ms before the retry (error, busy, expired), or before a released task is due again
--   (a durable sleep: the sleep callback),
--   failure kind: timeout | 5xx | connection | '' (none; expired and stalled are always
--   'timeout'), stored in the attempt record (``kind``) and on the task (``fk``, the last
--   failed attempt's kind), which the redrive policy filters dead tasks on (resubmit.lua),
--   task failure: '1' when the worker said the task itself failed (an answer it marked so, an
--   error callback), else '': stored in the attempt record (``tf``); an error or failure so
--   marked is the endpoint's success for its health, never a failure for its breaker
-- Returns, per task: {'OK', new state, due ms or '', name, version or '', attempt start ms,
--      created ms, circuit change of its endpoint ('open', 'closed' or ''), endpoint id or ''}
--      (the fields after the due time are for metrics) | {'NOTASK'} | {'STALE', state}
--      or {'ALIVE'} (outcome expired or stalled, but a heartbeat came meanwhile)
--      or {'NOQUEUE'} for every task when the queue is not registered (nothing changed);
--      then {'READY', how many subscribers heard it} when an attempt ended and ready tasks
--      wait (the wake channel was told; without it, nothing this call did gives a claim
--      something new to take), and {'NOTICE'} when a completion callback notice was recorded
-- Each end the gateway observed from the endpoint also feeds its health (health.lua): answers
-- and push failures always; a lease that ran out or heartbeats that stopped only once the
-- endpoint had answered the push 202 (t.acc, recorded by accept.lua). Before that answer, the
-- gateway pushing it owns the outcome: alive, it sees an answer, a timeout or a broken
-- connection before the lease ends (the dispatcher never waits past the lease). So a lease that
-- ran out with the push unanswered says the gateway died or lost Redis, not the endpoint
-- (heartbeats meanwhile do not change that: they may have gone to the dead gateway): it counts
-- for nothing, and its retry goes at once, without the backoff delay.
-- A final state settles the task's dependents (in this queue at once; in other queues through
-- the outbox) and its group; a job's run puts its end in the outbox too (record_run_end), and
-- so does a child task a parent invoked (record_child_end).
local now = tonumber(ARGV[1])
local policy = policy_of(KEYS[1])
if not policy then
  local replies = {}
  for i = 6, #ARGV, 9 do
    replies[#replies + 1] = {'NOQUEUE'}
  end
  return replies
end
local CHANNEL = ARGV[2]
local Q = {
  name = ARGV[3], policy = policy, meta = KEYS[2],
  ready = KEYS[7], seq = KEYS[9], scheduled = KEYS[8], waiting = KEYS[15],
  dependents = KEYS[16], groups = KEYS[17], outbox = KEYS[18], failed = KEYS[12],
  dead = KEYS[13], notify = KEYS[21], channel = CHANNEL, now = now, counts = KEYS[22],
}
key_hooks(Q)
local ended = {}
local breaker = policy.circuit_breaker or {failures = 5, open_for = 5, max_open_for = 300}
local healths = {}
-- What an observed end says of the endpoint: true healthy, false failed (for the breaker too),
-- 'busy' failed for the endpoint choice only (it shed load; the breaker ignores it).
local VERDICT = {
  succeeded = true, failed = true, error = false, expired = false, stalled = false,
  busy = 'busy',
}

-- Feed the health of the endpoint of attempt ``t`` with its end, when ``observed``; returns the
-- circuit's change, if any (see health_breaker). The task's own failure (``task_failed``) says
-- the endpoint answered properly: healthy.
local function feed_health(t, outcome, observed, task_failed)
  local h = health_of(healths, KEYS[20], t.ep)
  local verdict = VERDICT[outcome]
  if task_failed and (outcome == 'error' or outcome == 'failed') then
    verdict = true
  end
  if verdict == nil or not observed then
    if t.pr and h.probe then
      h.probe = nil -- the probe told nothing: another may go
      h.dirty = true
    end
    return
  end
  -- Push to answer; after a 202 the end comes from a callback and says nothing of it.
  local latency = nil
  if not t.acc then
    latency = now - t.started
  end
  health_sample(h, now, latency, verdict ~= true)
  if verdict ~= 'busy' then
    return health_breaker(h, breaker, now, verdict)
  end
end

local freed = false  -- an attempt ended: its endpoint has room again

-- The writes every end makes are gathered and made once per key after the last end (see
-- flush), not once per task. Records changed here are read from ``changed`` until then (the
-- same task may come twice in one call); endpoint records from ``endpoint_of``.
local changed, changed_ids = {}, {}
local ended_ids, attempts, results, freed_by = {}, {}, {}, {}
local indexed = {succeeded = {}, failed = {}, dead = {}, cancelled = {}}
local INDEX = {succeeded = KEYS[11], failed = KEYS[12], dead = KEYS[13], cancelled = KEYS[14]}
local endpoint_of = {}

-- Every task's stored record, read in one HMGET before the first is finished (one command
-- per call rather than per task). Only what this script has not written yet may come from it:
-- a record it changed is in ``changed``, and key_left (which may write other tasks' records)
-- empties it.
local prefetched = {}
if #ARGV >= 6 + 9 then  -- (one task: its HGET, no tables)
  local ids = {}
  for i = 6, #ARGV, 9 do
    ids[#ids + 1] = ARGV[i]
  end
  for from = 1, #ids, 1000 do
    local upto = math.min(from + 999, #ids)
    local raw = redis.call('HMGET', KEYS[2], unpack(ids, from, upto))
    for j = from, upto do
      prefetched[ids[j]] = raw[j - from + 1]
    end
  end
end

local function current(id, token)
  local t = changed[id]
  if t == nil then
    local raw = prefetched[id]
    if raw == nil then
      t = load_task(KEYS[2], id)
    else
      t = decode_task(raw)
    end
  end
  return fence(t, token)
end

local function save(id, t)
  if changed[id] == nil then
    changed_ids[#changed_ids + 1] = id
  end
  changed[id] = t
end

local function endpoint_record(ep_id)
  local raw = endpoint_of[ep_id]
  if raw == nil then
    raw = redis.call('HGET', KEYS[10], ep_id)
    endpoint_of[ep_id] = raw
  end
  return raw
end

local function flush()
  if #changed_ids == 0 then
    return
  end
  local records = {}
  for _, id in ipairs(changed_ids) do
    records[#records + 1] = id
    records[#records + 1] = task_json(changed[id])
  end
  redis.call('HSET', KEYS[2], unpack(records))
  if #ended_ids > 0 then
    redis.call('ZREM', KEYS[5], unpack(ended_ids))
    redis.call('ZREM', KEYS[19], unpack(ended_ids))
  end
  for ep_id, count in pairs(freed_by) do
    redis.call('HINCRBY', KEYS[6], ep_id, -count)
  end
  if #attempts > 0 then
    redis.call('HSET', KEYS[4], unpack(attempts))
  end
  if #results > 0 then
    redis.call('HSET', KEYS[3], unpack(results))
  end
  for state, entries in pairs(indexed) do
    if #entries > 0 then
      redis.call('ZADD', INDEX[state], unpack(entries))
    end
  end
end

local function finish_one(id, token, outcome, status, text, traceback, delay_ms, kind, task_failed)
  local t, refusal = current(id, token)
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

  ended_ids[#ended_ids + 1] = id
  freed = true
  -- A lease that ran out, or heartbeats that stopped, tell of the endpoint only after it
  -- answered the push.
  local observed = (outcome ~= 'expired' and outcome ~= 'stalled') or t.acc
  local endpoint = endpoint_record(t.ep)
  local ep_id = t.ep
  local circuit = nil
  if endpoint then
    freed_by[t.ep] = (freed_by[t.ep] or 0) + 1
    circuit = feed_health(t, outcome, observed, task_failed)
  end
  if not observed and outcome == 'expired' then
    delay_ms = 0
    text = 'the lease ran out before the endpoint answered (the gateway pushing it stopped?)'
  end

  -- A cancel request decides every end but a success: the work that succeeded is recorded as
  -- what happened; any other end (an error, a refusal, a busy or gone answer, a lease that ran
  -- out, a release, a sleep) ends the task cancelled, and its attempt reads so too (with the
  -- status, error and kind it ended with).
  local cancelled = t.cancel and outcome ~= 'succeeded'
  local attempt = {n = t.att, ep = t.ep, started = t.started, ended = now, outcome = outcome}
  if cancelled then
    attempt.outcome = 'cancelled'
  end
  if status ~= '' then
    attempt.status = tonumber(status)
  end
  if outcome ~= 'succeeded' and text ~= '' then
    attempt.error = text
    t.error = text
  elseif outcome == 'succeeded' then
    t.error = nil -- the task's error is its final outcome's; earlier ones stay with their attempts
  end
  if outcome == 'expired' or outcome == 'stalled' then
    kind = 'timeout'
  end
  if task_failed and outcome ~= 'succeeded' then
    attempt.tf = true
  end
  if outcome ~= 'succeeded' and kind ~= '' then
    attempt.kind = kind
    t.fk = kind
  else
    t.fk = nil
  end
  if traceback ~= '' and outcome == 'succeeded' then
    attempt.warn = traceback
    t.warn = traceback
  elseif traceback ~= '' then
    attempt.tb = traceback
  end
  t.hist = t.hist + 1
  attempts[#attempts + 1] = id .. ':' .. t.hist
  attempts[#attempts + 1] = cjson.encode(attempt)

  local next_state
  if outcome == 'succeeded' then
    next_state = 'succeeded'
  elseif cancelled then
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
  -- A busy worker, a vanished endpoint or a release does not spend an attempt (one that ends
  -- the task, cancelled, counts as made).
  if (outcome == 'gone' or outcome == 'released' or outcome == 'busy')
    and (next_state == 'retry' or next_state == 'requeue') then
    t.att = t.att - 1
  end
  if outcome == 'gone' and endpoint then
    local ep = cjson.decode(endpoint)
    ep.enabled = false
    ep.disabled_reason = 'answered 410 Gone'
    endpoint_of[t.ep] = cjson.encode(ep)
    redis.call('HSET', KEYS[10], t.ep, endpoint_of[t.ep])
  end

  if observed and outcome ~= 'succeeded' and outcome ~= 'failed' and outcome ~= 'gone' then
    t.lep = t.ep
  end
  t.lease = nil
  t.exp = nil
  t.deadline = nil
  t.ep = nil
  t.sti = nil
  t.acc = nil
  t.pr = nil
  local due = ''
  if next_state == 'retry' or next_state == 'requeue' then
    local delay = tonumber(delay_ms) or 0
    if next_state == 'retry' or (outcome == 'released' and delay > 0) then
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
      results[#results + 1] = id
      results[#results + 1] = text
    end
    local entries = indexed[next_state]
    entries[#entries + 1] = int(now)
    entries[#entries + 1] = id
    redis.call('PUBLISH', CHANNEL .. id, next_state)
    record_notice(Q, id, t)
    if t.jb then
      record_run_end(Q, id, t)
    end
    if t.par then
      record_child_end(Q, id, t, next_state == 'succeeded' and text or nil)
    end
    ended[#ended + 1] = {id, next_state == 'succeeded', t.error or next_state, t.grp}
  end
  if t.ck and t.state ~= 'queued' then
    key_left(Q, t, now)  -- (back in the ready set at once, it stays counted)
    prefetched = {}
  end
  save(id, t)
  return {
    'OK', t.state, due, t.name, t.ver or '', int(t.started or now), int(t.created or now),
    circuit or '', ep_id or '',
  }
end

local replies = {}
for i = 6, #ARGV, 9 do
  replies[#replies + 1] = finish_one(
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    ARGV[i + 7], ARGV[i + 8] == '1'
  )
end
flush()
health_save(healths, KEYS[20])
settle_all(Q, ended)
if freed and not Q.none_ready() then
  replies[#replies + 1] = {'READY', redis.call('PUBLISH', ARGV[4], ARGV[5])}
end
if Q.noticed then
  replies[#replies + 1] = {'NOTICE'}
end
return replies

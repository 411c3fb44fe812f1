-- Shared helpers, prepended to every script by gateway/store/scripts.py.
-- A task record (the JSON in the queue's meta hash) has these fields:
--   name, prio, state, created, run_at (ms), att (attempts started), hist (attempt records kept)
--   (these five, and started, left out at their default: see decode_task),
--   max_att / lease_ms / run_ms (per-task overrides, optional), tp (traceparent, optional), ts (tracestate),
--   sn (its sequence number in the ready set while queued; an older gateway's record has sq
--   for its older member shape, or m, the ready-set member itself: see ready_member), lease, exp (lease expiry), deadline, ep (endpoint),
--   started, first (first dispatch), hb (last heartbeat), progress, cancel, finished, error,
--   cap (required capability), own (owner), ver (version), dk (dedup key), sk (singleton key),
--   grp (group joined), ag (after_group), deps (depends_on ids), rs (pass_results: {queue, id} of
--   each dependency, in order; read after the claim by gateway/store/passed_results.py), wait (dependencies not yet met:
--   task ids and 'group:<name>'), hbi (max heartbeat interval override), sti (the heartbeat
--   interval this attempt is held to), acc (ms when the endpoint accepted this attempt: 202),
--   pr (this attempt is its endpoint's half-open probe), lep (the endpoint that failed the
--   last attempt, which the retry avoids), nfy (completion callback URL), ntc (its notice, once
--   the task ended: see record_notice), ck (concurrency key: key_limits.lua), jb (the job whose
--   run the task is: see record_run_end), par (the parent that invoked it: record_child_end),
--   wt (its wait for an event or a child), co (its cancel_on
--   entries): see wait_helpers.lua.
--   Debounced tasks also have dbk (debounce key) and dbn (enqueues merged into it);
--   a task a throttle delayed to a later window has thd (1): enqueue.lua.

-- Redis turns Lua numbers into strings with 14 significant digits; scores need all 16. A whole
-- number (every time in ms) goes through '%d', about a tenth of the cost of '%.0f' in C.
local function int(x)
  if x % 1 == 0 and x < 9007199254740992 and x > -9007199254740992 then
    return string.format('%d', x)
  end
  return string.format('%.0f', x)
end

local function ms(seconds)
  return math.floor(seconds * 1000 + 0.5)
end

-- A stored record leaves out the fields that hold their default (task_json): att and hist 0,
-- prio 0, created equal to run_at, state 'queued', started equal to first (an attempt's start
-- is the first one's until a retry: resubmit.lua clears first and keeps started, so a record
-- with first and without started can only be this). Records written before that carry them
-- all, and read the same. ``raw`` is the stored record (or nil / false for none).
local function decode_task(raw)
  if not raw then
    return nil
  end
  if string.byte(raw, 1) ~= 123 then  -- not '{': a plain queued record's text (plain_record)
    local sn, run_at, name = string.match(raw, '^(%d+) (%d+) (.*)$')
    run_at = tonumber(run_at)
    return {
      name = name, run_at = run_at, created = run_at, sn = tonumber(sn), att = 0, hist = 0,
      prio = 0, state = 'queued',
    }
  end
  local t = cjson.decode(raw)
  t.att = t.att or 0
  t.hist = t.hist or 0
  t.prio = t.prio or 0
  t.created = t.created or t.run_at
  t.state = t.state or 'queued'
  t.started = t.started or t.first
  return t
end

local function load_task(meta_key, id)
  return decode_task(redis.call('HGET', meta_key, id))
end

-- With COMPACT_RECORDS (the gateway's ``compact_records`` setting, which the loader sets), a
-- queued record holding nothing but its name, run_at and sequence number (every other field at
-- its default) is stored as the text '<sn> <run_at> <name>': 41 bytes for the race's no-op
-- task where its JSON is 66, jemalloc's 48-byte class instead of its 80. A JSON record begins
-- with '{', this one with a digit; decode_task and load_record (gateway/store/records.py) read
-- both, whatever the setting. nil for any other record.
local function plain_record(t)
  local att, hist, prio, created = t.att, t.hist, t.prio, t.created
  if t.state ~= 'queued' or not t.sn or (att or 0) ~= 0 or (hist or 0) ~= 0 or (prio or 0) ~= 0
      or (created or t.run_at) ~= t.run_at then
    return nil
  end
  -- No other field: name, run_at, sn and state, and those of the four defaults it holds.
  local expected = 4 + (att and 1 or 0) + (hist and 1 or 0) + (prio and 1 or 0) + (created and 1 or 0)
  for _ in pairs(t) do
    expected = expected - 1
  end
  if expected ~= 0 then
    return nil
  end
  return int(t.sn) .. ' ' .. int(t.run_at) .. ' ' .. t.name
end

-- The JSON stored for record ``t``: without the fields at their default (see decode_task), so
-- a queued no-op task's record fits a smaller allocation, and a claimed or finished one formats
-- one time fewer (or plain_record's text). ``t`` itself is left whole.
local function task_json(t)
  if COMPACT_RECORDS and t.state == 'queued' then
    local plain = plain_record(t)
    if plain then
      return plain
    end
  end
  local att, hist, prio, created, state, started = t.att, t.hist, t.prio, t.created, t.state, t.started
  if att == 0 then
    t.att = nil
  end
  if hist == 0 then
    t.hist = nil
  end
  if prio == 0 then
    t.prio = nil
  end
  if created == t.run_at then
    t.created = nil
  end
  if state == 'queued' then
    t.state = nil
  end
  if started ~= nil and started == t.first then
    t.started = nil
  end
  local encoded = cjson.encode(t)
  t.att, t.hist, t.prio, t.created, t.state, t.started = att, hist, prio, created, state, started
  return encoded
end

-- Store a new task's payload JSON; a task without one ('null') stores nothing, and every
-- reader takes a missing payload for null.
local function save_payload(payload_key, id, payload)
  if payload ~= 'null' then
    redis.call('HSET', payload_key, id, payload)
  end
end

-- Record ``t`` (or nil) when it is running under lease ``token``. Otherwise nil, and the reply
-- for the caller: {'NOTASK'}, or {'STALE', state} (the task moved on; nothing may change).
local function fence(t, token)
  if not t then
    return nil, {'NOTASK'}
  end
  if t.state ~= 'running' or t.lease ~= token then
    return nil, {'STALE', t.state}
  end
  return t, nil
end

-- A running task's stored record when ``token`` is its current lease (see fence).
local function fenced(meta_key, id, token)
  return fence(load_task(meta_key, id), token)
end

local function save_task(meta_key, id, t)
  local encoded = task_json(t)
  redis.call('HSET', meta_key, id, encoded)
  return encoded
end

-- Delete everything of task ``id`` (its record ``t`` as stored, or nil) that lives in its
-- queue's slot under fixed keys, in the script that deletes it (the sweep, clean): its record
-- (in ``meta_key``), and in the keys ``K`` names (payload, result, checkpoint, attempts, steps,
-- dedup, dedup_exp, singleton, notify, waits, wait_shapes) its payload, result, checkpoint,
-- attempt records and durable steps, its dedup and singleton entries while they still name it,
-- its completion callback notice still to deliver (which notice_claim.lua would drop, the task
-- gone), and its wait's and cancel_on's entries in the waits index.
-- What remains is the caller's: the log list (a key of its own, which the script must be given
-- in KEYS: sweep.lua and clean.lua are, and delete it) and the id index entry (another slot).
local function forget_task(meta_key, id, t, K)
  if t then
    for n = 1, t.hist do
      redis.call('HDEL', K.attempts, id .. ':' .. n)
    end
    if t.dk and redis.call('HGET', K.dedup, t.dk) == id then
      redis.call('HDEL', K.dedup, t.dk)
      redis.call('ZREM', K.dedup_exp, t.dk)
    end
    if t.sk and redis.call('HGET', K.singleton, t.sk) == id then
      redis.call('HDEL', K.singleton, t.sk)
    end
    if t.ntc and t.ntc.st == 'pending' then
      redis.call('ZREM', K.notify, id)
    end
    if t.wt or t.co then  -- its wait's and cancel_on's index entries (wait_helpers.lua)
      unindex_waits({waits = K.waits, shapes = K.wait_shapes}, id, t)
    end
  end
  redis.call('HDEL', meta_key, id)
  redis.call('HDEL', K.payload, id)
  redis.call('HDEL', K.result, id)
  redis.call('HDEL', K.checkpoint, id)
  redis.call('HDEL', K.steps, id)
end

local function policy_of(queue_key)
  local raw = redis.call('HGET', queue_key, 'policy')
  if not raw then
    return nil
  end
  return cjson.decode(raw)
end

-- Due times. A script that makes something of its queue due at some time (a scheduled task, a
-- lease, a stall deadline, a notice in the outbox, a link to redo, a dedup window or finished
-- task to sweep) calls due_at(ms). The loader (gateway/store/scripts.py) wraps the scripts that
-- do so: after the script, announce() compares the earliest such time with the queue hash's
-- ``due`` field (what the global index ``jg:due`` was last told) and, only when it is earlier,
-- stores it there and returns it, so that the caller lowers the index too. See
-- gateway/store/tasks/due.py for the whole protocol. RELINK_AFTER_MS is set by the loader.
local DUE = {at = nil}

local function due_at(at)
  if DUE.at == nil or at < DUE.at then
    DUE.at = at
  end
end

-- The first score of a ZSET as due time, if any.
local function due_first(zset_key)
  local first = redis.call('ZRANGE', zset_key, 0, 0, 'WITHSCORES')
  if first[2] then
    due_at(tonumber(first[2]))
  end
end

local function announce(queue_key)
  if DUE.at == nil then
    return false
  end
  local told = tonumber(redis.call('HGET', queue_key, 'due'))
  if told and told <= DUE.at then
    return false
  end
  redis.call('HSET', queue_key, 'due', int(DUE.at))
  return int(DUE.at)
end

-- A queue's keys as the scripts that settle dependencies need them. ``Q`` has: name, policy,
-- meta, ready, seq, scheduled, waiting, dependents, groups, outbox, failed, dead, notify,
-- channel (the done channel prefix) and now.

-- Completion callbacks. A task with a notify URL (nfy) that reaches a final state gets a
-- notice in its record, ``ntc`` = {st = 'pending' | 'delivered' | 'failed', n = tries so far,
-- due = ms of the next try, le = last error, at = ms delivered}, and its id in the queue's
-- ``notify`` set, due now: written by the script that ends the task, so no stopped gateway can
-- lose it. gateway/dispatch/notices.py delivers it (notice_claim.lua, notice_settle.lua).
-- Sets Q.noticed, which the script reports so its caller marks the queue in the global index.
-- The caller saves the record.
local function record_notice(Q, id, t)
  if t.nfy then
    t.ntc = {st = 'pending', n = 0, due = Q.now}
    redis.call('ZADD', Q.notify, int(Q.now), id)
    Q.noticed = true
  end
end

-- Runs of jobs. A task enqueued as a run of a job has ``jb`` (the job id; the run id is the task
-- id). The script that ends it appends its end to the queue's ``outbox`` in the same step, as
-- {run = job id, id, state, att, first, finished, error, warn} (the record's own fields): the
-- run's record lives in the job's keys, on another Cluster slot, where the recoverer delivers
-- it (gateway/store/run_ends.py), so no stopped gateway can lose a run's end. Called only for
-- a record with ``jb``: other tasks pay nothing.
local function record_run_end(Q, id, t)
  redis.call('RPUSH', Q.outbox, cjson.encode({
    run = t.jb, id = id, state = t.state, att = t.att, first = t.first, finished = t.finished,
    error = t.error, warn = t.warn,
  }))
  due_at(Q.now)
end

-- Invoked children (docs/durable.md, "Invoking a task"). A task a parent invoked has ``par`` =
-- {q = the parent's queue, id = the parent's id, s = the parent's step}. The script that ends
-- it appends its end to its queue's ``outbox`` in the same step, as {ch = its id, pq, p, s (the
-- parent's link), st = its final state, r = its result JSON when it succeeded, e = its error}:
-- the recoverer (at once: the queue is made due now) hands it to the parent's queue
-- (resume_child.lua), wherever that lives (gateway/store/dependencies.py). Called only for a
-- record with ``par``: other tasks pay one field test.
local function record_child_end(Q, id, t, result)
  redis.call('RPUSH', Q.outbox, cjson.encode({
    ch = id, pq = t.par.q, p = t.par.id, s = t.par.s, st = t.state, r = result, e = t.error,
  }))
  due_at(Q.now)
end

-- Remove ``id`` from the waiting set and make it ready, or scheduled when its time is ahead.
local function release(Q, id, t)
  redis.call('ZREM', Q.waiting, id)
  t.wait = nil
  if t.run_at > Q.now then
    t.state = 'scheduled'
    redis.call('ZADD', Q.scheduled, int(t.run_at), id)
    due_at(t.run_at)
  elseif Q.admit then
    -- The queue's scripts with per-key concurrency hooks (key_limits.lua, key_hooks).
    local was_empty = Q.none_ready()
    Q.admit(id, t)
    Q.woke = Q.woke or was_empty
  else
    local was_empty = redis.call('ZCARD', Q.ready) == 0
    make_ready(Q.ready, Q.seq, id, t)
    Q.woke = Q.woke or was_empty
  end
end

-- End a task that never ran (or ran and must not retry) as failed, or dead with dead-lettering.
local function fail_unrun(Q, id, t, reason)
  local state = 'failed'
  if Q.policy.dead_letter then
    state = 'dead'
  end
  if t.state == 'waiting' then
    redis.call('ZREM', Q.waiting, id)
  end
  t.wait = nil
  t.state = state
  t.error = reason
  t.finished = Q.now
  redis.call('ZADD', Q[state], int(Q.now), id)
  redis.call('PUBLISH', Q.channel .. id, state)
  record_notice(Q, id, t)
  if t.jb then
    record_run_end(Q, id, t)
  end
  if t.par then
    record_child_end(Q, id, t, nil)
  end
end

-- Dependency ``source`` of waiting task ``id`` ended: drop it from the task's wait list, then
-- release the task when nothing is left, or fail it when the dependency did not succeed (its
-- end goes on the ``ended`` work list). Returns true when the task was waiting for it.
local function settle_one(Q, id, source, ok, reason, ended)
  local t = load_task(Q.meta, id)
  if not t or t.state ~= 'waiting' or not t.wait then
    return false
  end
  local left, found = {}, false
  for _, w in ipairs(t.wait) do
    if w == source then
      found = true
    else
      left[#left + 1] = w
    end
  end
  if not found then
    return false
  end
  if not ok then
    local why = 'dependency ' .. source .. ' did not succeed: ' .. reason
    fail_unrun(Q, id, t, why)
    ended[#ended + 1] = {id, false, why, t.grp}
  elseif #left == 0 then
    release(Q, id, t)
  else
    t.wait = left
  end
  save_task(Q.meta, id, t)
  return true
end

-- Work list of ended tasks whose dependents and groups must hear of it: {id, ok, reason}.
local function settle_all(Q, ended)
  local i = 1
  -- Only enqueue.lua adds dependents: when the hash is empty now, no source below has any, and
  -- each ended task skips its HGET (a finish of tasks nobody waits for pays one EXISTS a call).
  local dependents = #ended > 0 and redis.call('EXISTS', Q.dependents) == 1
  while i <= #ended do
    local id, ok, reason, grp = ended[i][1], ended[i][2], ended[i][3], ended[i][4]
    i = i + 1
    -- Swept once its queue's retention has passed.
    due_at(Q.now + ms(ok and Q.policy.retention_succeeded or Q.policy.retention_failed))
    local sources = {{id, ok, reason}}
    if grp then
      local raw = redis.call('HGET', Q.groups, grp)
      if raw then
        local g = cjson.decode(raw)
        if ok then
          g.ok = g.ok + 1
          if g.ok == g.n and not g.bad then
            sources[#sources + 1] = {'group:' .. grp, true, ''}
          end
        elseif not g.bad then
          g.bad = 'task ' .. id .. ' of the group failed: ' .. reason
          sources[#sources + 1] = {'group:' .. grp, false, g.bad}
        end
        redis.call('HSET', Q.groups, grp, cjson.encode(g))
      end
    end
    for _, s in ipairs(sources) do
      local source, sok, sreason = s[1], s[2], s[3]
      local raw = dependents and redis.call('HGET', Q.dependents, source)
      if raw then
        redis.call('HDEL', Q.dependents, source)
        for _, entry in ipairs(cjson.decode(raw)) do
          local queue, dep = entry[1], entry[2]
          if queue ~= Q.name then
            redis.call('RPUSH', Q.outbox, cjson.encode({queue, dep, source, sok, sreason}))
            due_at(Q.now)
          else
            settle_one(Q, dep, source, sok, sreason, ended)
          end
        end
      end
    end
  end
end

-- Record that task ``id`` waits for ``source`` (same queue or not) to end.
local function add_dependent(dependents_key, source, queue, id)
  local raw = redis.call('HGET', dependents_key, source)
  local list = {}
  if raw then
    list = cjson.decode(raw)
  end
  list[#list + 1] = {queue, id}
  redis.call('HSET', dependents_key, source, cjson.encode(list))
end

-- Enqueue tasks into one queue: all of them, or none.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] ready   KEYS[5] scheduled
-- KEYS[6] seq   KEYS[7] waiting   KEYS[8] dependents   KEYS[9] groups   KEYS[10] outbox
-- KEYS[11] done:failed   KEYS[12] done:dead   KEYS[13] dedup   KEYS[14] dedup expiry
-- KEYS[15] singleton   KEYS[16] capabilities   KEYS[17] links   KEYS[18] notify
-- KEYS[19] key_counts (per-key concurrency: key_limits.lua)
-- KEYS[20..] one per task with a debounce or throttle option, in the tasks' order: its key's
--           ``debounce:<name> <key>`` or ``throttle:<name> <key>`` (see "Debounce and throttle")
-- KEYS[#KEYS - 1] waits, KEYS[#KEYS] wait_shapes: last, only when a task has cancel_on (its
--           record's ``co``, indexed as it is stored: wait_helpers.lua); others pay nothing
-- ARGV[1] now ms   ARGV[2] queue name   ARGV[3] wake channel   ARGV[4] done channel prefix
-- ARGV[5..] three values per task: id, initial record JSON (name, prio, created, run_at and
--           optional fields, see the prelude; ``xdeps`` lists dependencies in other queues as
--           {queue, id}; ``fl``, not kept, a debounce {'d', window ms, max wait ms or 0} or a
--           throttle {'t', window ms, limit, delay?}), payload JSON
-- ARGV[#ARGV] (last) the enqueuing gateway's name, or '': added to the wake message, so that
--           gateway's dispatcher can tell its own enqueue's message (it claimed already) apart
-- Returns {'OK', one entry per task...}: the state it was stored in, or 'dup:<id>' when its
--      dedup or singleton key matched task <id> (nothing stored for it), or one of the debounce
--      and throttle entries below ('rep:', 'thr:', 'dly:'), or 'rec:<record JSON>' for a task
--      that came with dependencies (its record as stored: the second pass below decides its
--      state, wait list and depends_on, and may end it); then 'WOKE' when the
--      wake channel was told (the ready set was empty), then 'NOTICE' when a completion
--      callback notice was recorded (a dependency had failed already)
--   or {'NOQUEUE'} | {'EXISTS', id} | {'NOGROUP', task index, group} | {'NODEP', index, id}
-- Dependencies in other queues are recorded in ``links`` ("<id> <queue> <dependency>", scored
-- by now): the caller registers them there, then removes the entry.
-- Due times: see the prelude (the loader returns {earliest due ms announced or nil, reply}).
local policy = policy_of(KEYS[1])
if not policy then
  return {'NOQUEUE'}
end
local now = tonumber(ARGV[1])
local queue = ARGV[2]
local count = (#ARGV - 5) / 3
for i = 0, count - 1 do
  local id = ARGV[5 + i * 3]
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    return {'EXISTS', id}
  end
end
local Q = {
  name = queue, policy = policy, meta = KEYS[2], ready = KEYS[4], seq = KEYS[6],
  scheduled = KEYS[5], waiting = KEYS[7], dependents = KEYS[8], groups = KEYS[9],
  outbox = KEYS[10], failed = KEYS[11], dead = KEYS[12], notify = KEYS[18], channel = ARGV[4],
  now = now, counts = KEYS[19],
}
key_hooks(Q)

-- Refusals come before any write.
local batch = {}
local group_size = {}
for i = 0, count - 1 do
  local t = cjson.decode(ARGV[6 + i * 3])
  t.prio = t.prio or 0  -- (left out at their default, as in a stored record: decode_task)
  t.created = t.created or t.run_at
  batch[ARGV[5 + i * 3]] = t
  if t.grp then
    group_size[t.grp] = (group_size[t.grp] or 0) + 1
  end
end
for i = 0, count - 1 do
  local t = batch[ARGV[5 + i * 3]]
  if t.ag and not group_size[t.ag] and redis.call('HEXISTS', KEYS[9], t.ag) == 0 then
    return {'NOGROUP', i, t.ag}
  end
  local cross = {}
  for _, x in ipairs(t.xdeps or {}) do
    cross[x[2]] = true
  end
  for _, dep in ipairs(t.deps or {}) do
    if not cross[dep] and not batch[dep] and redis.call('HEXISTS', KEYS[2], dep) == 0 then
      return {'NODEP', i, dep}
    end
  end
end

-- Debounce and throttle (docs/durable.md). A task with either option comes with its own key
-- (KEYS[20..]); a task with neither pays nothing here. Both are decided by this script alone,
-- so concurrent enqueues through any number of gateways are applied one after the other.

-- The two are made only when a task brought a key for them: a script call without makes no
-- closure for them (each costs Redis on every call, like the prelude's helpers).
local debounce, throttle
if #KEYS > 19 then
  -- Debounce: at most one pending (scheduled) task per key. An enqueue whose key's task is still
  -- scheduled and its window not over replaces that task's payload and moves its run_at to
  -- now + window (never past the burst's first enqueue + max wait): returns the entry
  -- 'rep:<id> <record JSON>', the pending task's record as stored now (its ``dbn`` counting
  -- the burst's enqueues; everything but the payload and run_at is the first enqueue's, so
  -- the caller answers with this record, not the request). Otherwise
  -- returns nil: ``t`` is stored as a new task (its run_at already the window's end) holding the
  -- key, which expires at its run_at.
  function debounce(key, id, t, payload)
    local window, most = t.fl[2], t.fl[3]
    t.fl = nil
    local held = redis.call('GET', key)
    if held then
      local holder, first = string.match(held, '^(%S+) (%d+)$')
      local h = load_task(KEYS[2], holder)
      if h and h.state == 'scheduled' and h.run_at > now then
        local run_at = now + window
        if most > 0 then
          run_at = math.min(run_at, tonumber(first) + most)
        end
        h.run_at = run_at
        h.dbn = (h.dbn or 1) + 1
        redis.call('HSET', KEYS[3], holder, payload)
        if run_at > now then
          redis.call('ZADD', KEYS[5], int(run_at), holder)
          redis.call('SET', key, held, 'PX', int(run_at - now))
          due_at(run_at)
        else  -- the burst reached its max wait: it runs now, and the next enqueue starts anew
          redis.call('ZREM', KEYS[5], holder)
          redis.call('DEL', key)
          admit_ready(Q, holder, h)
        end
        return 'rep:' .. holder .. ' ' .. save_task(KEYS[2], holder, h)
      end
    end
    t.dbn = 1
    redis.call('SET', key, id .. ' ' .. int(now), 'PX', int(math.max(t.run_at - now, 1)))
    return nil
  end

  -- Throttle: the key's latest window [start, start + window) lets ``limit`` enqueues through.
  -- Past it, a new window starts now. Over the limit, 'drop' returns 'thr:<last id let through>'
  -- (nothing is stored), and 'delay' moves ``t`` into the next window (its run_at at that
  -- window's start; ``thd`` marks its record, so a read shows it delayed as the enqueue's
  -- answer did) and returns true; windows holding delayed tasks follow one another, so at
  -- most ``limit`` tasks of a key are due per window. Returns nil when ``t`` goes unchanged.
  function throttle(key, id, t)
    local window, limit, delay = t.fl[2], t.fl[3], t.fl[4]
    t.fl = nil
    local start, n, last = now, 0, ''
    local held = redis.call('GET', key)
    if held then
      local a, b, c = string.match(held, '^(%d+) (%d+) (%S*)$')
      start, n, last = tonumber(a), tonumber(b), c
      if now >= start + window then
        start, n = now, 0
      end
    end
    if n >= limit or start > now then  -- full, or only later windows have room
      if not delay then
        return 'thr:' .. last
      end
      if n >= limit then
        start, n = start + window, 0
      end
    end
    n = n + 1
    redis.call('SET', key, int(start) .. ' ' .. n .. ' ' .. id, 'PX', int(start + window - now))
    if start > t.run_at then
      t.run_at = start
      t.thd = 1
      return true
    end
    return nil
  end
end

local was_empty = Q.none_ready()
local default_window = ms(policy.dedup_window or 3600)
local out = {'OK'}
local stored = {}
local ended = {}
local matched = {}  -- a member's id -> the earlier task its dedup or singleton key matched
local delayed = nil  -- a member's id -> true when its throttle moved it to a later window
local flows = 19  -- the last KEYS entry a debounce or throttle option has taken
-- First pass: store each task, or find its duplicate.
for i = 0, count - 1 do
  local id = ARGV[5 + i * 3]
  local t = batch[id]
  local dup = nil
  local flow = nil  -- a debounce or throttle entry that stands for this task
  local as_sent = not t.fl and not t.ck  -- (see the record's HSET below)
  if t.dk then
    local first = redis.call('HGET', KEYS[13], t.dk)
    local until_ms = tonumber(redis.call('ZSCORE', KEYS[14], t.dk) or '0')
    if first and until_ms > now and redis.call('HEXISTS', KEYS[2], first) == 1 then
      dup = first
    end
  end
  if not dup and t.sk then
    local holder = redis.call('HGET', KEYS[15], t.sk)
    if holder then
      local h = load_task(KEYS[2], holder)
      if h and (h.state == 'queued' or h.state == 'scheduled' or h.state == 'waiting') then
        dup = holder
      end
    end
  end
  if t.fl then
    flows = flows + 1
    if dup then  -- matched by its dedup or singleton key: the option does not apply
    elseif t.fl[1] == 'd' then
      flow = debounce(KEYS[flows], id, t, ARGV[7 + i * 3])
    else
      flow = throttle(KEYS[flows], id, t)
      if flow == true then
        delayed = delayed or {}
        delayed[id], flow = true, nil
      end
    end
  end
  if dup then
    matched[id] = dup
    out[#out + 1] = 'dup:' .. dup
  elseif flow then
    -- A member replaced into, or dropped for, an earlier task is that task (if it still is).
    local earlier = string.match(flow, '^%a+:(%S+)')
    if earlier and redis.call('HEXISTS', KEYS[2], earlier) == 1 then
      matched[id] = earlier
    end
    out[#out + 1] = flow
  else
    t.att = 0
    t.hist = 0
    if t.dk then
      redis.call('HSET', KEYS[13], t.dk, id)
      redis.call('ZADD', KEYS[14], int(now + default_window), t.dk)
      due_at(now + default_window)
    end
    if t.sk then
      redis.call('HSET', KEYS[15], t.sk, id)
    end
    if t.cap then
      redis.call('SADD', KEYS[16], t.cap)
    end
    if t.grp then
      local raw = redis.call('HGET', KEYS[9], t.grp)
      local g = {n = 0, ok = 0}
      if raw then
        g = cjson.decode(raw)
      end
      g.n = g.n + 1
      redis.call('HSET', KEYS[9], t.grp, cjson.encode(g))
    end
    local wait = {}
    for _, x in ipairs(t.xdeps or {}) do
      wait[#wait + 1] = x[2]
      redis.call('ZADD', KEYS[17], int(now), id .. ' ' .. x[1] .. ' ' .. x[2])
      due_at(now + RELINK_AFTER_MS)
    end
    t.xdeps = nil
    if #wait > 0 or t.ag or (t.deps and #t.deps > 0) then
      t.wait = wait  -- only a waiting task keeps a (maybe empty, for now) wait list
      t.state = 'waiting'
    elseif t.run_at > now then
      t.state = 'scheduled'
      redis.call('ZADD', KEYS[5], int(t.run_at), id)
      due_at(t.run_at)
    else
      admit_ready(Q, id, t)
    end
    save_payload(KEYS[3], id, ARGV[7 + i * 3])
    -- A task whose record only gained its sequence number or state here is stored as the JSON
    -- it came as, that added: the record task_json would write, less an encode (the caller
    -- leaves out prio 0 and created equal to run_at; nothing else here is at a default).
    -- Debounce and throttle change the record (fl, dbn, run_at), and so may a per-key
    -- concurrency limit's admission: encoded whole. A record sent whole (by an older
    -- gateway) is stored whole, and reads the same.
    local raw = ARGV[6 + i * 3]
    if as_sent and t.state == 'queued' and t.sn and string.sub(raw, -1) == '}' then
      -- plain_record's text, read off the JSON as sent when it holds only a name (one that
      -- JSON needs no escape for) and run_at: one match, where plain_record walks the table.
      local name, run_at = nil, nil
      if COMPACT_RECORDS then
        name, run_at = string.match(raw, '^{"name":"([^"\\]*)","run_at":(%d+)}$')
      end
      if name then
        redis.call('HSET', KEYS[2], id, int(t.sn) .. ' ' .. run_at .. ' ' .. name)
      else
        redis.call('HSET', KEYS[2], id, string.sub(raw, 1, -2) .. ',"sn":' .. int(t.sn) .. '}')
      end
    elseif as_sent and t.state == 'scheduled' and string.sub(raw, -1) == '}' then
      redis.call('HSET', KEYS[2], id, string.sub(raw, 1, -2) .. ',"state":"scheduled"}')
    else
      save_task(KEYS[2], id, t)
    end
    if t.co then
      index_cancel_on({waits = KEYS[#KEYS - 1], shapes = KEYS[#KEYS]}, id, t)
    end
    stored[#stored + 1] = {#out + 1, id}
    out[#out + 1] = t.state
  end
end

-- Second pass: tie waiting tasks to their dependencies in this queue (the batch included).
-- (Each record is still the one in ``batch``: nothing else wrote it since the first pass.)
for _, s in ipairs(stored) do
  local id = s[2]
  local t = batch[id]
  if t.state == 'waiting' then
    local failure = nil
    local cross = {}
    for _, w in ipairs(t.wait) do
      cross[w] = true
    end
    local sources = {}
    for i, dep in ipairs(t.deps or {}) do
      if not cross[dep] then
        -- A member matched to an earlier task is that task: wait for it, and name it (once in
        -- the wait list, when two dependencies are one task).
        local source = matched[dep] or dep
        t.deps[i] = source
        if not cross[source] then
          sources[#sources + 1] = source
          cross[source] = true
        end
      end
    end
    for _, from in ipairs(t.rs or {}) do  -- pass_results: that task's result, too
      if from[1] == queue and matched[from[2]] then
        from[2] = matched[from[2]]
      end
    end
    if t.ag then
      sources[#sources + 1] = 'group:' .. t.ag
    end
    for _, source in ipairs(sources) do
      local state, why
      if string.sub(source, 1, 6) == 'group:' then
        local g = cjson.decode(redis.call('HGET', KEYS[9], t.ag))
        if g.bad then
          state, why = 'failed', g.bad
        elseif g.ok == g.n then
          state = 'succeeded'
        end
      else
        local d = load_task(KEYS[2], source)
        if d then
          state, why = d.state, d.error or d.state
        else  -- a member of this batch its throttle dropped, with no task let through left
          state, why = 'failed', 'dropped by its throttle'
        end
      end
      if state == 'succeeded' then
        -- met already
      elseif state == 'failed' or state == 'dead' or state == 'cancelled' then
        failure = failure or ('dependency ' .. source .. ' did not succeed: ' .. why)
      else
        t.wait[#t.wait + 1] = source
        add_dependent(KEYS[8], source, queue, id)
      end
    end
    if failure then
      fail_unrun(Q, id, t, failure)
      ended[#ended + 1] = {id, false, failure, t.grp}
    elseif #t.wait == 0 then
      release(Q, id, t)
    else
      redis.call('ZADD', KEYS[7], int(now), id)
    end
    s[3] = save_task(KEYS[2], id, t)
  end
end
-- Settling failed dependencies may end tasks of this batch: their records are read again.
settle_all(Q, ended)
-- A task the second pass decided answers with its record (read again when settling may have
-- changed it); the others with their state.
for _, s in ipairs(stored) do
  if s[3] then
    out[s[1]] = 'rec:' .. (#ended > 0 and redis.call('HGET', KEYS[2], s[2]) or s[3])
  elseif #ended > 0 then
    out[s[1]] = load_task(KEYS[2], s[2]).state
  else
    out[s[1]] = batch[s[2]].state
  end
  if delayed and delayed[s[2]] and not s[3] then
    out[s[1]] = 'dly:' .. out[s[1]] .. ' ' .. int(batch[s[2]].run_at)
  end
end

-- Told once the ready set stops being empty: '<queue> <tasks now ready>[ <gateway>]' (they are
-- all new), so each gateway wakes as many pull polls as there are tasks.
if was_empty then
  local ready = ready_count(Q)
  if ready > 0 then
    local origin = ARGV[#ARGV]
    redis.call('PUBLISH', ARGV[3], queue .. ' ' .. ready .. (origin ~= '' and ' ' .. origin or ''))
    out[#out + 1] = 'WOKE'
  end
end
if Q.noticed then
  out[#out + 1] = 'NOTICE'
end
return out

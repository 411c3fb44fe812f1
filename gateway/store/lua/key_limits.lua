-- Per-key concurrency (the queue policy's ``key_concurrency``): at most ``limit`` tasks of one
-- concurrency key (the record's ``ck``) are ready or running at once. Prepended, like the
-- prelude, to the scripts that use these helpers (gateway/store/scripts.py).
--
-- The queue's ``key_counts`` hash holds, per key, how many of its tasks are in the ready set
-- proper or running: the key's ``active`` count. A queued task of a key at its limit is *held*:
-- it stays in the ready ZSET, state 'queued', but under a member the claim never reads,
--   '~' .. <length of the key as 4 hex digits> .. key .. <place (order_of)> .. id
-- ('~' sorts after every capability and after '/', and no capability holds it; the length
-- makes one key's prefix never the start of another's). So every reader of queued tasks
-- (counts, depth gauges, listings, cancel by ready_member) sees held tasks as queued, while
-- the claim script, which reads only '<capability>/' ranges, needs no change and never skips
-- one: a held task costs the claim nothing. The record keeps the held member in ``m``.
--
-- Transitions, each in the script that makes it:
--   admission (enqueue, dependencies met, scheduled task due, resubmit): ready when the key's
--     active count is below the limit (the count goes up), else held;
--   claim (ready -> running) and a retry or release straight back to ready: the count stays;
--   a task leaves ready or running for anything else (finished, cancelled, scheduled for a
--     retry or a durable sleep): the count goes down and the key's next held task (priority,
--     then run_at, then FIFO) moves to the ready set, counted, with its run_at in the member
--     replaced by the time it moves: fair rotation, it queues behind the tasks of other keys
--     already ready at its priority instead of ahead of them;
--   a policy change (key_rebalance.lua) moves held tasks while their keys have room.
-- The count of a key dropping to 0 deletes its field, so idle keys leave nothing.

-- The queue's per-key limit, or nil when the policy has none (a task with a key then still
-- counts, so the counts stay exact if a limit comes back, but is never held).
local function key_limit(policy)
  local kc = policy.key_concurrency
  if kc == nil or kc == cjson.null then
    return nil
  end
  return kc.limit
end

local function held_prefix(ck)
  return '~' .. string.format('%04x', #ck) .. ck
end

-- Whether queued task ``t`` is held (not in the ready set proper).
local function is_held(t)
  return t.m ~= nil and string.sub(t.m, 1, 1) == '~'
end

-- Whether nothing in ready set ``ready_key`` can be claimed (only held tasks, or none). For a
-- queue without a per-key limit this is one ZCARD, as before (no held task exists then).
local function none_ready(ready_key, policy)
  local n = redis.call('ZCARD', ready_key)
  if n == 0 or key_limit(policy) == nil then
    return n == 0
  end
  return redis.call('ZLEXCOUNT', ready_key, '[~', '+') == n
end

-- Admit queued task ``t`` (which has ``t.ck``): into the ready set when its key has room,
-- counted, else held. ``K``: {ready, seq, counts, limit}. The caller saves the record.
local function key_admit(K, id, t)
  local active = tonumber(redis.call('HGET', K.counts, t.ck) or '0')
  if K.limit == nil or active < K.limit then
    redis.call('HINCRBY', K.counts, t.ck, 1)
    make_ready(K.ready, K.seq, id, t)
    return
  end
  local seq = redis.call('INCR', K.seq)
  t.state = 'queued'
  t.sq = nil
  t.sn = seq
  t.m = held_prefix(t.ck) .. order_of(1000 - t.prio, t.run_at, seq) .. id
  redis.call('ZADD', K.ready, 0, t.m)
end

-- Put a queued task in the ready set: through key_admit when it has a concurrency key.
local function admit_ready(K, id, t)
  if t.ck then
    key_admit(K, id, t)
  else
    make_ready(K.ready, K.seq, id, t)
  end
end

-- Move up to ``room`` held tasks of key ``ck`` to the ready set, counted, each behind the
-- tasks already ready at its priority (its member's run_at is ``now``). Returns how many moved.
local function key_promote(K, ck, room, now)
  if room <= 0 then
    return 0
  end
  local p = held_prefix(ck)
  local held = redis.call('ZRANGEBYLEX', K.ready, '[' .. p, '(' .. p .. '~', 'LIMIT', 0, room)
  local moved = 0
  for _, member in ipairs(held) do
    local id = member_id(member)
    local t = load_task(K.meta, id)
    redis.call('ZREM', K.ready, member)
    if t and t.state == 'queued' then
      local seq = redis.call('INCR', K.seq)
      t.sq = nil
      t.sn = seq
      t.m = ready_prefix(t.cap) .. order_of(1000 - t.prio, now, seq) .. id
      redis.call('ZADD', K.ready, 0, t.m)
      redis.call('HINCRBY', K.counts, ck, 1)
      save_task(K.meta, id, t)
      moved = moved + 1
    end
  end
  return moved
end

-- Task ``t`` of key ``t.ck`` left the ready set proper or running for another state: count it
-- out and move the key's next held task in when the key has room now.
local function key_left(K, t, now)
  local active = redis.call('HINCRBY', K.counts, t.ck, -1)
  if active <= 0 then
    redis.call('HDEL', K.counts, t.ck)
    active = 0
  end
  local room = 1
  if K.limit ~= nil then
    room = K.limit - active
  end
  K.moved = (K.moved or 0) + key_promote(K, t.ck, math.min(room, 1), now)
end

-- Give the settling table ``Q`` of a script (see the prelude) the per-key hooks its release()
-- uses, with ``Q.counts`` set to the key_counts key; returns the table key_left and key_admit
-- take (Q itself).
local function key_hooks(Q)
  Q.limit = key_limit(Q.policy)
  Q.admit = function(id, t)
    admit_ready(Q, id, t)
  end
  Q.none_ready = function()
    return none_ready(Q.ready, Q.policy)
  end
  return Q
end

-- How many tasks of ``Q.ready`` can be claimed (held ones are not counted).
local function ready_count(Q)
  local n = redis.call('ZCARD', Q.ready)
  if n > 0 and Q.limit ~= nil then
    n = n - redis.call('ZLEXCOUNT', Q.ready, '[~', '+')
  end
  return n
end

-- Shared helpers, prepended to every script by gateway/store/scripts.py.
-- A task record (the JSON in the queue's meta hash) has these fields:
--   name, prio, state, created, run_at (ms), att (attempts started), hist (attempt records kept),
--   max_att / lease_ms / run_ms (per-task overrides, optional), tp (traceparent, optional),
--   m (ready-set member while queued), lease, exp (lease expiry), deadline, ep (endpoint),
--   started, first (first dispatch), hb (last heartbeat), progress, cancel, finished, error.

-- Redis turns Lua numbers into strings with 14 significant digits; scores need all 16.
local function int(x)
  return string.format('%.0f', x)
end

local function ms(seconds)
  return math.floor(seconds * 1000 + 0.5)
end

-- Ready-set order: priority (higher first), then run_at, then FIFO. Priority is -1000..1000, so
-- rank 0..2000 times 2^42 plus a millisecond time stays below 2^53 and is exact in a double.
local RUN_AT_SPAN = 4398046511104

local function load_task(meta_key, id)
  local raw = redis.call('HGET', meta_key, id)
  if not raw then
    return nil
  end
  return cjson.decode(raw)
end

-- A running task's record when ``token`` is its current lease. Otherwise nil, and the reply
-- for the caller: {'NOTASK'}, or {'STALE', state} (the task moved on; nothing may change).
local function fenced(meta_key, id, token)
  local t = load_task(meta_key, id)
  if not t then
    return nil, {'NOTASK'}
  end
  if t.state ~= 'running' or t.lease ~= token then
    return nil, {'STALE', t.state}
  end
  return t, nil
end

local function save_task(meta_key, id, t)
  local encoded = cjson.encode(t)
  redis.call('HSET', meta_key, id, encoded)
  return encoded
end

local function policy_of(queue_key)
  local raw = redis.call('HGET', queue_key, 'policy')
  if not raw then
    return nil
  end
  return cjson.decode(raw)
end

-- Put a task in the ready set. The member is a 12-hex-digit sequence number and the id.
local function make_ready(ready_key, seq_key, id, t)
  local seq = redis.call('INCR', seq_key)
  local member = string.format('%012x', seq) .. id
  t.m = member
  t.state = 'queued'
  redis.call('ZADD', ready_key, int((1000 - t.prio) * RUN_AT_SPAN + t.run_at), member)
end

-- The id inside a ready-set member.
local function member_id(member)
  return string.sub(member, 13)
end

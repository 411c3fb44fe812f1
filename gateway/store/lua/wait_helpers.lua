-- Helpers for waits for an event and cancel_on (docs/durable.md, "Waiting for an event"),
-- prepended before the prelude by gateway/store/scripts.py (so the prelude's forget_task can
-- call them); they use nothing of it.
-- A task waiting for an event (state 'scheduled' until its timeout) has ``wt`` in its record:
--   {s = step name, e = event name, m = canonical JSON of the match, h = its shape (the
--   canonical JSON of the match's sorted field names), r = ms the wait was recorded,
--   lb = lookback ms}: an event of that name whose data has the match's fields at the match's
--   values, accepted at or after r - lb, resumes it (resume.lua), else its timeout does
--   (promote.lua).
-- A task waiting for a child task it invoked (invoke.lua) has ``wt`` = {s = step name,
--   c = the child's id, cq = the child's queue, r = ms recorded, tr = the step's result at the
--   timeout (JSON)}: no event matches it (no ``e``), and it is in no index; the child's end
--   resumes it (resume_child.lua), else its timeout does (promote.lua).
-- A task waiting for a durable HTTP call (call.lua) has ``wt`` = {s = step name, k = 'call',
--   q = the request (JSON), to = one try's timeout ms, r = ms recorded, tr = the step's result
--   at the backstop (JSON)}: in no event index, but in the queue's ``calls`` ZSET, which
--   unwait leaves when given it (``W.calls``); its answer resumes it (resume_call.lua), else
--   its backstop does (promote.lua).
-- A task enqueued with cancel_on has ``co``: a list of {e, m, h}, one per entry.
-- The queue's index of both (gateway/store/keys.py): ``W.waits`` HASH, '<e>\31<m>' -> JSON
-- list of entries 'w<id>' (a wait) and 'c<id>' (a cancel_on); ``W.shapes`` HASH, '<e>' ->
-- JSON object shape -> how many entries of that shape it holds.

local function wait_field(e, m)
  return e .. '\31' .. m
end

-- Add entry ``kind .. id`` under (e, m), counted under shape ``h`` (once: a repeat is a no-op).
local function index_add(W, kind, id, e, m, h)
  local field = wait_field(e, m)
  local entry = kind .. id
  local raw = redis.call('HGET', W.waits, field)
  local list = {}
  if raw then
    list = cjson.decode(raw)
    for _, x in ipairs(list) do
      if x == entry then
        return
      end
    end
  end
  list[#list + 1] = entry
  redis.call('HSET', W.waits, field, cjson.encode(list))
  local shapes = {}
  local rawshapes = redis.call('HGET', W.shapes, e)
  if rawshapes then
    shapes = cjson.decode(rawshapes)
  end
  shapes[h] = (shapes[h] or 0) + 1
  redis.call('HSET', W.shapes, e, cjson.encode(shapes))
end

-- Remove entry ``kind .. id`` from (e, m); its shape's count goes down only when it was there
-- (so removing twice is harmless). Empty fields and shapes are deleted.
local function index_remove(W, kind, id, e, m, h)
  local field = wait_field(e, m)
  local entry = kind .. id
  local raw = redis.call('HGET', W.waits, field)
  if not raw then
    return
  end
  local list, found = {}, false
  for _, x in ipairs(cjson.decode(raw)) do
    if x == entry then
      found = true
    else
      list[#list + 1] = x
    end
  end
  if not found then
    return
  end
  if #list == 0 then
    redis.call('HDEL', W.waits, field)
  else
    redis.call('HSET', W.waits, field, cjson.encode(list))
  end
  local rawshapes = redis.call('HGET', W.shapes, e)
  if not rawshapes then
    return
  end
  local shapes = cjson.decode(rawshapes)
  local n = (shapes[h] or 1) - 1
  if n > 0 then
    shapes[h] = n
  else
    shapes[h] = nil
  end
  if next(shapes) == nil then
    redis.call('HDEL', W.shapes, e)
  else
    redis.call('HSET', W.shapes, e, cjson.encode(shapes))
  end
end

-- Index task ``id``'s cancel_on entries (its record ``t`` has ``co``).
local function index_cancel_on(W, id, t)
  for _, c in ipairs(t.co) do
    index_add(W, 'c', id, c.e, c.m, c.h)
  end
end

-- Remove task ``id``'s wait from the index (a call's from ``W.calls``, when given) and from
-- ``t`` (the caller saves it).
local function unwait(W, id, t)
  local wt = t.wt
  if wt then
    if wt.e then  -- (a wait for a child task, ``c``, is in no index)
      index_remove(W, 'w', id, wt.e, wt.m, wt.h)
    elseif wt.k == 'call' and W.calls then
      redis.call('ZREM', W.calls, id)
    end
    t.wt = nil
  end
end

-- Remove task ``id``'s wait and cancel_on entries from the index, and clear both from ``t``
-- (the caller saves it). A record without either costs the caller one field test.
local function unindex_waits(W, id, t)
  unwait(W, id, t)
  if t.co then
    for _, c in ipairs(t.co) do
      index_remove(W, 'c', id, c.e, c.m, c.h)
    end
    t.co = nil
  end
end

-- How task ``t``'s wait ended, as its recorded step keeps it (``wait`` beside the step's
-- result; the admin timeline reads it): {kind, since_ms (when the wait was recorded), by (what
-- ended it: 'event', 'child', 'call' or 'timeout')} and the kind's own fields: an event wait's
-- ``event`` name, an invoke's child ``queue`` and ``id``, a durable call's ``method`` and
-- ``url`` (a wait that names its kind, ``k``, as a call's does, gets that kind).
local function wait_mark(wt, by)
  local kind = wt.k or (wt.c and 'invoke') or 'event'
  local mark = '{"kind":' .. cjson.encode(kind) .. ',"by":"' .. by .. '"'
  if wt.r then
    mark = mark .. ',"since_ms":' .. string.format('%d', wt.r)
  end
  if kind == 'event' then
    mark = mark .. ',"event":' .. cjson.encode(wt.e)
  elseif kind == 'invoke' then
    mark = mark .. ',"queue":' .. cjson.encode(wt.cq) .. ',"id":' .. cjson.encode(wt.c)
  elseif kind == 'call' then
    local call = cjson.decode(wt.q)
    mark = mark .. ',"method":' .. cjson.encode(call.method or 'GET') .. ',"url":'
      .. cjson.encode(call.url)
  end
  return mark .. '}'
end

-- Record the end of task ``id``'s wait (``t.wt``, still set) as its step: ``result_json`` (JSON
-- text) under the wait's step name, for the attempt to come, with how the wait ended
-- (wait_mark: ``by``), appended to the task's steps as step.lua records one (a name recorded
-- before keeps its first result); and mark the record (``stp``) so the claim carries them.
local function append_wait_step(steps_key, id, t, result_json, by, now)
  local name = t.wt.s
  local stored = redis.call('HGET', steps_key, id)
  if stored then
    for _, step in ipairs(cjson.decode(stored)) do
      if step.name == name then
        return
      end
    end
  end
  local entry = '{"name":' .. cjson.encode(name) .. ',"result":' .. result_json
    .. ',"attempt":' .. string.format('%d', t.att + 1) .. ',"recorded_ms":'
    .. string.format('%d', now) .. ',"wait":' .. wait_mark(t.wt, by) .. '}'
  if stored then
    redis.call('HSET', steps_key, id, string.sub(stored, 1, -2) .. ',' .. entry .. ']')
  else
    redis.call('HSET', steps_key, id, '[' .. entry .. ']')
  end
  t.stp = 1
end

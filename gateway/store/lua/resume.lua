-- An event reaches one queue's waits index (gateway/services/waits.py): every task waiting for
-- it in the fields given is resumed, and every task with a cancel_on there is named for the
-- caller to cancel (cancel.lua, which needs keys of its own).
-- A wait entry resumes its task only while the wait is current: the task is scheduled for that
-- very wait (``wt`` with this event name and match), and the event was accepted at or after
-- the wait was recorded less its lookback. Then, in this one script: the wait's step is
-- recorded with the event ({id, name, data}) as its result, the wait and its index entries are
-- cleared, and the task is ready (held behind its concurrency key's limit, as promote.lua
-- does). A task resumed before has no wait: a second event, or the same one again, leaves it
-- alone. So a wait resumes once, whichever of the event's path and the wait's post-check comes
-- first (docs/durable.md, "Waiting for an event").
-- A cancel_on entry whose task has ended is dropped (its cancel has been acted on, or the task
-- ended otherwise); one of a task created after the event was accepted is passed over.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] steps   KEYS[4] scheduled   KEYS[5] ready
-- KEYS[6] seq   KEYS[7] key_counts   KEYS[8] waits   KEYS[9] wait_shapes
-- ARGV[1] now ms   ARGV[2] event name   ARGV[3] event accepted ms
-- ARGV[4] the step's result: the event's JSON {id, name, data}   ARGV[5] wake channel
-- ARGV[6] queue name   ARGV[7] only this task id ('' for every task)
-- ARGV[8..] the index fields ('<event name>\31<canonical match>') the event's data matches
-- Returns a flat list of pairs: 'w', '<id> <step name>' for each task resumed; 'c', '<id>' for
-- each task to cancel.
local now = tonumber(ARGV[1])
local name = ARGV[2]
local accepted = tonumber(ARGV[3])
local only = ARGV[7]
local W = {waits = KEYS[8], shapes = KEYS[9]}
local FINAL = {succeeded = true, failed = true, dead = true, cancelled = true}
local out = {}
local K = nil
local was_empty = nil
local moved = 0

local function make_due(id, t)
  if was_empty == nil then
    was_empty = redis.call('ZCARD', KEYS[5]) == 0
  end
  t.run_at = now
  if t.ck then
    if K == nil then
      K = key_hooks({
        policy = policy_of(KEYS[1]) or {}, ready = KEYS[5], seq = KEYS[6], meta = KEYS[2],
        counts = KEYS[7],
      })
      was_empty = was_empty or ready_count(K) == moved
    end
    key_admit(K, id, t)
  else
    make_ready(KEYS[5], KEYS[6], id, t)
  end
  moved = moved + 1
end

for i = 8, #ARGV do
  local field = ARGV[i]
  local raw = redis.call('HGET', KEYS[8], field)
  for _, entry in ipairs(raw and cjson.decode(raw) or {}) do
    local kind, id = string.sub(entry, 1, 1), string.sub(entry, 2)
    if only == '' or id == only then
      local t = load_task(KEYS[2], id)
      local wt = t and t.wt
      if kind == 'w' and wt and t.state == 'scheduled' and wt.e == name
        and wait_field(wt.e, wt.m) == field and accepted >= wt.r - wt.lb then
        append_wait_step(KEYS[3], id, t, ARGV[4], 'event', now)
        unwait(W, id, t)  -- (its cancel_on entries stay: the task is not done)
        redis.call('ZREM', KEYS[4], id)
        make_due(id, t)
        save_task(KEYS[2], id, t)
        out[#out + 1] = 'w'
        out[#out + 1] = id .. ' ' .. wt.s
      elseif kind == 'c' and t and FINAL[t.state] then
        unindex_waits(W, id, t)
        save_task(KEYS[2], id, t)
      elseif kind == 'c' and t and accepted >= t.created then
        out[#out + 1] = 'c'
        out[#out + 1] = id
      end
    end
  end
end
if was_empty and moved > 0 then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return out

-- Record one durable step of a running task, fenced by its lease token: the step's name and
-- JSON result, with the attempt and time, appended to the task's list of steps (a JSON array
-- built by concatenation, so a result is stored byte for byte as the worker sent it). A name
-- already recorded keeps its first result. The record's ``stp`` flag tells the claim that the
-- task has steps to carry in its push (a task without it costs the claim nothing).
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] steps
-- ARGV[1] task id   ARGV[2] lease token   ARGV[3] now ms   ARGV[4] step name
-- ARGV[5] result JSON   ARGV[6] most bytes of a task's steps
-- A cancel requested of the running attempt does not refuse it: the attempt still runs (and its
-- end decides the task's: docs/operator-guide.md, "Cancelling"), and the answer says so.
-- Returns {'OK', 1 recorded | 0 the name was recorded before, the attempt that recorded it,
--          cancel requested 0|1}
--      | {'TOOBIG', bytes the steps would take} | {'NOTASK'} | {'STALE', state} | {'NOQUEUE'}
if not redis.call('HEXISTS', KEYS[1], 'policy') then
  return {'NOQUEUE'}
end
local id = ARGV[1]
local t, refusal = fenced(KEYS[2], id, ARGV[2])
if not t then
  return refusal
end
local cancel = 0
if t.cancel then
  cancel = 1
end
local name = ARGV[4]
local stored = redis.call('HGET', KEYS[3], id)
if stored then
  for _, step in ipairs(cjson.decode(stored)) do
    if step.name == name then
      return {'OK', 0, step.attempt, cancel}
    end
  end
end
local entry = '{"name":' .. cjson.encode(name) .. ',"result":' .. ARGV[5] .. ',"attempt":'
  .. int(t.att) .. ',"recorded_ms":' .. int(tonumber(ARGV[3])) .. '}'
local list
if stored then
  list = string.sub(stored, 1, -2) .. ',' .. entry .. ']'
else
  list = '[' .. entry .. ']'
end
if #list > tonumber(ARGV[6]) then
  return {'TOOBIG', #list}
end
redis.call('HSET', KEYS[3], id, list)
if not t.stp then
  t.stp = 1
  save_task(KEYS[2], id, t)
end
return {'OK', 1, int(t.att), cancel}

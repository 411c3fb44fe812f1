-- Delete finished tasks of one state now (an operator's clean), oldest first, as sweep.lua does
-- past retention: the record, payload, result, checkpoint, attempt records and index entry.
-- KEYS[1] meta   KEYS[2] payload   KEYS[3] result   KEYS[4] checkpoint   KEYS[5] attempts
-- KEYS[6] done:<state> (the index of the state being cleaned)
-- ARGV[1] only tasks finished at or before this ms   ARGV[2] only tasks of this name ('' any)
-- ARGV[3] index entries to pass over first (examined by earlier calls and kept: another name
-- or owner)
-- ARGV[4] most index entries to examine   ARGV[5] most tasks to delete
-- ARGV[6] only tasks of this owner ('' or absent: any)
-- Returns {entries examined, entries kept, deleted ids...}; the caller deletes the deleted
-- tasks' log lists and index entries.
local name = ARGV[2]
local owner = ARGV[6] or ''
local budget = tonumber(ARGV[5])
local ids = redis.call(
  'ZRANGEBYSCORE', KEYS[6], '-inf', ARGV[1], 'LIMIT', tonumber(ARGV[3]), tonumber(ARGV[4])
)
local examined = 0
local kept = 0
local deleted = {}
for _, id in ipairs(ids) do
  if #deleted >= budget then
    break
  end
  examined = examined + 1
  local t = load_task(KEYS[1], id)
  if t and ((name ~= '' and t.name ~= name) or (owner ~= '' and t.own ~= owner)) then
    kept = kept + 1
  else
    if t then
      for n = 1, t.hist or 0 do
        redis.call('HDEL', KEYS[5], id .. ':' .. n)
      end
      redis.call('HDEL', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id)
      redis.call('HDEL', KEYS[3], id)
      redis.call('HDEL', KEYS[4], id)
      deleted[#deleted + 1] = id
    end
    -- An entry without a record is garbage: drop it, but it counts as no task.
    redis.call('ZREM', KEYS[6], id)
  end
end
local out = {examined, kept}
for _, id in ipairs(deleted) do
  out[#out + 1] = id
end
return out

-- Delete finished tasks of one state now (an operator's clean), oldest first, as sweep.lua does
-- past retention, in this one script: each task's record, payload, result, checkpoint, attempt
-- records and durable steps, its dedup and singleton entries while they still name it, and its
-- undelivered completion notice.
-- KEYS[1] meta   KEYS[2] payload   KEYS[3] result   KEYS[4] checkpoint   KEYS[5] attempts
-- KEYS[6] done:<state> (the index of the state being cleaned)   KEYS[7] steps   KEYS[8] dedup
-- KEYS[9] dedup expiry   KEYS[10] singleton   KEYS[11] notify
-- ARGV[1] only tasks finished at or before this ms   ARGV[2] only tasks of this name ('' any)
-- ARGV[3] index entries to pass over first (examined by earlier calls and kept: another name
-- or owner)
-- ARGV[4] most index entries to examine   ARGV[5] most tasks to delete
-- ARGV[6] only tasks of this owner ('' or absent: any)
-- Returns {entries examined, entries kept, deleted ids...}; the caller deletes the deleted
-- tasks' log lists (keys of their own, which expire by themselves) and index entries (other
-- slots).
local name = ARGV[2]
local owner = ARGV[6] or ''
local budget = tonumber(ARGV[5])
local ids = redis.call(
  'ZRANGEBYSCORE', KEYS[6], '-inf', ARGV[1], 'LIMIT', tonumber(ARGV[3]), tonumber(ARGV[4])
)
local examined = 0
local kept = 0
local deleted = {}
local K = {
  payload = KEYS[2], result = KEYS[3], checkpoint = KEYS[4], attempts = KEYS[5], steps = KEYS[7],
  dedup = KEYS[8], dedup_exp = KEYS[9], singleton = KEYS[10], notify = KEYS[11],
}
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
      forget_task(KEYS[1], id, t, K)
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

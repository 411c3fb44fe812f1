-- Delete finished tasks of one state now (an operator's clean), oldest first, as sweep.lua does
-- past retention, in this one script: each task's record, payload, result, checkpoint, attempt
-- records, durable steps and log list, its dedup and singleton entries while they still name
-- it, and its undelivered completion notice (its index entry, in another slot, is the
-- caller's). The entries to examine come from the caller, which read them from the index of
-- the state (ZRANGEBYSCORE with ARGV[1] and the offset), so that their log lists can be passed
-- in KEYS; an entry no longer in the index, or no longer finished by ARGV[1], is passed over.
-- KEYS[1] meta   KEYS[2] payload   KEYS[3] result   KEYS[4] checkpoint   KEYS[5] attempts
-- KEYS[6] done:<state> (the index of the state being cleaned)   KEYS[7] steps   KEYS[8] dedup
-- KEYS[9] dedup expiry   KEYS[10] singleton   KEYS[11] notify   KEYS[12] waits
-- KEYS[13] wait_shapes
-- KEYS[14..] the log lists of the entries to examine, in their order
-- ARGV[1] only tasks finished at or before this ms   ARGV[2] only tasks of this name ('' any)
-- ARGV[3] most tasks to delete   ARGV[4] only tasks of this owner ('' any)
-- ARGV[5..] the index entries (task ids) to examine, oldest first
-- Returns {entries examined, entries kept, deleted ids...}: kept entries (another name or
-- owner) stay first in the index, for the caller to pass over next time.
local name = ARGV[2]
local owner = ARGV[4]
local budget = tonumber(ARGV[3])
local finished_by = tonumber(ARGV[1])
local examined = 0
local kept = 0
local deleted = {}
local K = {
  payload = KEYS[2], result = KEYS[3], checkpoint = KEYS[4], attempts = KEYS[5], steps = KEYS[7],
  dedup = KEYS[8], dedup_exp = KEYS[9], singleton = KEYS[10], notify = KEYS[11],
  waits = KEYS[12], wait_shapes = KEYS[13],
}
for i = 5, #ARGV do
  if #deleted >= budget then
    break
  end
  examined = examined + 1
  local id = ARGV[i]
  local finished = redis.call('ZSCORE', KEYS[6], id)
  if finished and tonumber(finished) <= finished_by then
    local t = load_task(KEYS[1], id)
    if t and ((name ~= '' and t.name ~= name) or (owner ~= '' and t.own ~= owner)) then
      kept = kept + 1
    else
      if t then
        forget_task(KEYS[1], id, t, K)
        redis.call('DEL', KEYS[14 + i - 5])
        deleted[#deleted + 1] = id
      end
      -- An entry without a record is garbage: drop it, but it counts as no task.
      redis.call('ZREM', KEYS[6], id)
    end
  end
end
local out = {examined, kept}
for _, id in ipairs(deleted) do
  out[#out + 1] = id
end
return out

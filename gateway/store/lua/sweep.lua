-- Delete finished tasks kept longer than the queue's retention: each task's record, payload,
-- result, checkpoint, attempt records, durable steps and log list, its dedup and singleton
-- entries while they still name it and its undelivered completion notice, all in this one
-- script, so a gateway that dies after it leaves nothing of them in the queue's slot (their
-- index entries, in other slots, are the caller's).
-- The candidates come from the caller (gateway/store/tasks/recovery.py), which read them from
-- the done:<state> indexes, so that their log lists can be passed in KEYS: each is deleted only
-- when it is still in its index, past the retention of the policy as it is now.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] result   KEYS[5] checkpoint
-- KEYS[6] attempts   KEYS[7] done:succeeded   KEYS[8] done:failed   KEYS[9] done:dead
-- KEYS[10] done:cancelled   KEYS[11] dedup   KEYS[12] dedup expiry   KEYS[13] steps
-- KEYS[14] singleton   KEYS[15] notify   KEYS[16] outbox   KEYS[17] waits   KEYS[18] wait_shapes
-- KEYS[19..] the candidates' log lists, in their order
-- ARGV[1] now ms   ARGV[2] most dedup keys to drop
-- ARGV[3..6] how many candidates of each state (succeeded, failed, dead, cancelled)
-- ARGV[7..] the candidates' ids, state by state in that order
-- Returns the ids deleted (the caller deletes their index entries).
-- A job's run (a record with ``jb``) is kept while the outbox holds anything: its end may be
-- there, not yet kept with the run (record_run_end in the prelude). The recoverer delivers the
-- outbox before it sweeps, so this holds a run only for an end recorded meanwhile; a task that
-- is not a run costs nothing more (the LLEN is made at the first run met, if any).
local policy = policy_of(KEYS[1])
if not policy then
  return {}
end
local now = tonumber(ARGV[1])
local stale = redis.call('ZRANGEBYSCORE', KEYS[12], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #stale > 0 then
  redis.call('HDEL', KEYS[11], unpack(stale))
  redis.call('ZREM', KEYS[12], unpack(stale))
end
local deleted = {}
local K = {
  payload = KEYS[3], result = KEYS[4], checkpoint = KEYS[5], attempts = KEYS[6], steps = KEYS[13],
  dedup = KEYS[11], dedup_exp = KEYS[12], singleton = KEYS[14], notify = KEYS[15],
  waits = KEYS[17], wait_shapes = KEYS[18],
}
local i = 0  -- candidates seen (ARGV[6 + i], KEYS[18 + i])
local undelivered = nil  -- whether the outbox holds anything: asked at the first run met
for k = 7, 10 do
  local retention = policy.retention_failed
  if k == 7 then
    retention = policy.retention_succeeded
  end
  local cutoff = now - ms(retention)
  for _ = 1, tonumber(ARGV[k - 4]) do
    i = i + 1
    local id = ARGV[6 + i]
    local finished = redis.call('ZSCORE', KEYS[k], id)
    if finished and tonumber(finished) <= cutoff then
      local t = load_task(KEYS[2], id)
      local held = false
      if t and t.jb then
        if undelivered == nil then
          undelivered = redis.call('LLEN', KEYS[16]) > 0
        end
        held = undelivered
      end
      if not held then
        forget_task(KEYS[2], id, t, K)
        redis.call('DEL', KEYS[18 + i])
        redis.call('ZREM', KEYS[k], id)
        deleted[#deleted + 1] = id
      end
    end
  end
end
return deleted

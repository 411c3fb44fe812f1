-- Delete finished tasks kept longer than the queue's retention.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] result   KEYS[5] checkpoint
-- KEYS[6] attempts   KEYS[7] done:succeeded   KEYS[8] done:failed   KEYS[9] done:dead
-- KEYS[10] done:cancelled   KEYS[11] dedup   KEYS[12] dedup expiry   KEYS[13] outbox
-- ARGV[1] now ms   ARGV[2] most tasks to delete per state (and most dedup keys to drop)
-- Returns the ids deleted (the caller deletes their log lists and index entries).
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
local undelivered = nil  -- whether the outbox holds anything: asked at the first run met
for k = 7, 10 do
  local retention = policy.retention_failed
  if k == 7 then
    retention = policy.retention_succeeded
  end
  local ids = redis.call(
    'ZRANGEBYSCORE', KEYS[k], '-inf', int(now - ms(retention)), 'LIMIT', 0, tonumber(ARGV[2])
  )
  for _, id in ipairs(ids) do
    local t = load_task(KEYS[2], id)
    local held = false
    if t and t.jb then
      if undelivered == nil then
        undelivered = redis.call('LLEN', KEYS[13]) > 0
      end
      held = undelivered
    end
    if not held then
      if t then
        for n = 1, t.hist do
          redis.call('HDEL', KEYS[6], id .. ':' .. n)
        end
      end
      redis.call('HDEL', KEYS[2], id)
      redis.call('HDEL', KEYS[3], id)
      redis.call('HDEL', KEYS[4], id)
      redis.call('HDEL', KEYS[5], id)
      redis.call('ZREM', KEYS[k], id)
      deleted[#deleted + 1] = id
    end
  end
end
return deleted

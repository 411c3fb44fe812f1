-- Delete finished tasks kept longer than the queue's retention: each task's record, payload,
-- result, checkpoint, attempt records and durable steps, its dedup and singleton entries while
-- they still name it and its undelivered completion notice, all in this one script (so a
-- gateway that dies after it leaves none of them behind: what is left to the caller lies
-- outside the script's reach).
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] payload   KEYS[4] result   KEYS[5] checkpoint
-- KEYS[6] attempts   KEYS[7] done:succeeded   KEYS[8] done:failed   KEYS[9] done:dead
-- KEYS[10] done:cancelled   KEYS[11] dedup   KEYS[12] dedup expiry   KEYS[13] steps
-- KEYS[14] singleton   KEYS[15] notify
-- ARGV[1] now ms   ARGV[2] most tasks to delete per state (and most dedup keys to drop)
-- Returns the ids deleted (the caller deletes their log lists, which are keys of their own and
-- expire by themselves, and their index entries, which lie in other slots).
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
}
for k = 7, 10 do
  local retention = policy.retention_failed
  if k == 7 then
    retention = policy.retention_succeeded
  end
  local ids = redis.call(
    'ZRANGEBYSCORE', KEYS[k], '-inf', int(now - ms(retention)), 'LIMIT', 0, tonumber(ARGV[2])
  )
  for _, id in ipairs(ids) do
    forget_task(KEYS[2], id, load_task(KEYS[2], id), K)
    redis.call('ZREM', KEYS[k], id)
    deleted[#deleted + 1] = id
  end
end
return deleted

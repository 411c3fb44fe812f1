-- The task of a run begun by begin_run is enqueued (or the run was failed for good): take the
-- run out of the job's pending set, and recompute the job's due time. With run id '' it only
-- recomputes the due time (``JobStore.touch``).
-- KEYS[1] job hash   KEYS[2] pending runs (ZSET)
-- ARGV[1] now ms   ARGV[2] run id   ARGV[3] held re-check ms   ARGV[4] pending resume ms
-- Returns {'OK', due ms or ''} | {'NOJOB'}
if redis.call('HEXISTS', KEYS[1], 'def') == 0 then
  return {'NOJOB'}
end
adopt_pending_field(KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[2], ARGV[2])
return {'OK', job_due(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4]))}

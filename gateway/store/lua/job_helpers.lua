-- Helpers of the job scripts (gateway/store/jobs.py), prepended to each after the prelude.
-- A job hash has: def, next (next fire ms), held (fire ms of a firing held behind a running
-- run), last (newest run id), count, skipped, due. Its pending set (ZSET run id -> ms begun)
-- holds every run whose firing or run now was claimed and whose task is not known to be
-- enqueued yet.

-- Move the single ``pending`` field ('<run id> <ms>') that older versions kept in the job hash
-- into the pending set, so a run begun before an upgrade is resumed like any other.
local function adopt_pending_field(job_key, pending_key)
  local old = redis.call('HGET', job_key, 'pending')
  if not old then
    return
  end
  local id, at = string.match(old, '^(%S+) (%d+)$')
  if id then
    redis.call('ZADD', pending_key, 'NX', at, id)
  end
  redis.call('HDEL', job_key, 'pending')
end

-- Store and return when the firing loop must look at the job next: its next fire time, a
-- held firing's re-check (``recheck`` ms from now), or the resume of its oldest pending run
-- (``resume`` ms after it began), whichever comes first; nil when none.
local function job_due(job_key, pending_key, now, recheck, resume)
  adopt_pending_field(job_key, pending_key)
  local due = tonumber(redis.call('HGET', job_key, 'next') or '')
  local function earlier(x)
    if x and (not due or x < due) then
      due = x
    end
  end
  if redis.call('HEXISTS', job_key, 'held') == 1 then
    earlier(now + recheck)
  end
  local oldest = redis.call('ZRANGE', pending_key, 0, 0, 'WITHSCORES')[2]
  if oldest then
    earlier(tonumber(oldest) + resume)
  end
  if due then
    redis.call('HSET', job_key, 'due', int(due))
    return int(due)
  end
  redis.call('HDEL', job_key, 'due')
  return ''
end

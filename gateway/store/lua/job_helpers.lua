-- Helpers of the job scripts (gateway/store/jobs.py), prepended to each after the prelude.
-- A job hash has: def, next (next fire ms), held (fire ms of a firing held behind a running
-- run), last (newest run id), pending ('<run id> <ms>': a run whose task is being enqueued),
-- count, skipped, due.

-- Store and return when the firing loop must look at the job next: its next fire time, a
-- held firing's re-check (``recheck`` ms from now), or a pending run's resume (``resume`` ms
-- after it began), whichever comes first; nil when none.
local function job_due(job_key, now, recheck, resume)
  local due = tonumber(redis.call('HGET', job_key, 'next') or '')
  local function earlier(x)
    if x and (not due or x < due) then
      due = x
    end
  end
  if redis.call('HEXISTS', job_key, 'held') == 1 then
    earlier(now + recheck)
  end
  local pending = redis.call('HGET', job_key, 'pending')
  if pending then
    earlier(tonumber(string.match(pending, ' (%d+)$')) + resume)
  end
  if due then
    redis.call('HSET', job_key, 'due', int(due))
    return int(due)
  end
  redis.call('HDEL', job_key, 'due')
  return ''
end

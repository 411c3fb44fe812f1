-- Claim one firing of a job (or a manual run) and record the run it makes. The claim is keyed
-- by the job and the fire time: of several gateways that read the same due firing, one finds
-- ``next`` (or ``held``) still equal to the fire time it read and makes the run; the others
-- find it moved on and change nothing. The run enters the job's pending set here, in the same
-- step as the claim; its task is enqueued next, by the caller, and end_run takes it out of the
-- set. Until then, another gateway redoes that enqueue after the resume delay.
-- KEYS[1] job hash   KEYS[2] runs (ZSET)   KEYS[3] run records and ends (HASH)
-- KEYS[4] pending (ZSET)
-- ARGV[1] now ms   ARGV[2] kind: 'fire' (a due fire time) | 'release' (a held firing) | 'manual'
-- ARGV[3] fire ms the caller read (fire: next; release: held; manual: '')
-- ARGV[4] newest run id the caller read ('' none): its overlap decision is about that run
-- ARGV[5] next fire ms after this firing, '' for none (fire only)
-- ARGV[6] action: 'run' | 'skip' (overlap skip) | 'hold' (overlap queue_one)
-- ARGV[7] run id   ARGV[8] run record JSON   ARGV[9] runs kept per job
-- ARGV[10] held re-check ms   ARGV[11] pending resume ms
-- Returns {'OK', due ms or ''} | {'NOJOB'} | {'TAKEN'} (another gateway claimed this firing, or
-- the schedule changed) | {'CHANGED'} (another run was made since the caller read the job)
local now = tonumber(ARGV[1])
local kind = ARGV[2]
if redis.call('HEXISTS', KEYS[1], 'def') == 0 then
  return {'NOJOB'}
end
if kind == 'fire' or kind == 'release' then
  local field = 'next'
  if kind == 'release' then
    field = 'held'
  end
  if redis.call('HGET', KEYS[1], field) ~= ARGV[3] then
    return {'TAKEN'}
  end
  if (redis.call('HGET', KEYS[1], 'last') or '') ~= ARGV[4] then
    return {'CHANGED'}
  end
end
if kind == 'fire' then
  if ARGV[5] == '' then
    redis.call('HDEL', KEYS[1], 'next')
  else
    redis.call('HSET', KEYS[1], 'next', ARGV[5])
  end
elseif kind == 'release' then
  redis.call('HDEL', KEYS[1], 'held')
end
local action = ARGV[6]
if action == 'hold' and redis.call('HEXISTS', KEYS[1], 'held') == 1 then
  action = 'skip' -- one firing is held already: queue_one holds at most one
end
if action == 'skip' then
  redis.call('HINCRBY', KEYS[1], 'skipped', 1)
elseif action == 'hold' then
  redis.call('HSET', KEYS[1], 'held', ARGV[3])
else
  local id = ARGV[7]
  redis.call('HSET', KEYS[3], id, ARGV[8])
  redis.call('ZADD', KEYS[2], int(now), id)
  redis.call('HSET', KEYS[1], 'last', id)
  redis.call('ZADD', KEYS[4], int(now), id)
  redis.call('HINCRBY', KEYS[1], 'count', 1)
  -- Drop the oldest records past the runs kept, but not a pending run's: its task is made from
  -- its record (it is dropped at a later run, once its task exists).
  adopt_pending_field(KEYS[1], KEYS[4])
  local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[9])
  if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, extra - 1)) do
      if not redis.call('ZSCORE', KEYS[4], old) then
        redis.call('HDEL', KEYS[3], old, old .. ':end')
        redis.call('ZREM', KEYS[2], old)
      end
    end
  end
end
return {'OK', job_due(KEYS[1], KEYS[4], now, tonumber(ARGV[10]), tonumber(ARGV[11]))}

-- When each kind of a queue's due work comes (recover.lua, reckon_due.lua), and the reckoning
-- of its next due time. ``Q`` has the keys: hash (the queue hash), scheduled, running, stalls,
-- dedup_exp, links, outbox, calls, and done (the four finished sets: succeeded first, then
-- failed, dead, cancelled).

-- The first score of a sorted set (nil: empty).
local function first_score(key)
  local found = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(found[2])
end

-- The earliest time in ms each kind of work of the queue comes due, from its own sets (a kind
-- with nothing is left out), by the names recover.lua answers: promote (a scheduled task),
-- expired (a lease), stalled (a heartbeat deadline, stall policy ``redispatch`` only), calls
-- (a durable call's lease), links (a cross-queue link to make again), outbox (``now``: due at
-- once), sweep (a dedup window's end, a finished task's retention).
local function due_times(Q, policy, now)
  local T = {}
  T.promote = first_score(Q.scheduled)
  T.expired = first_score(Q.running)
  if policy.stall_policy == 'redispatch' then
    T.stalled = first_score(Q.stalls)
  end
  T.calls = first_score(Q.calls)
  local link = first_score(Q.links)
  T.links = link and link + RELINK_AFTER_MS
  if redis.call('LLEN', Q.outbox) > 0 then
    T.outbox = now
  end
  local sweep = first_score(Q.dedup_exp)
  local function sweep_at(at)
    if at and (sweep == nil or at < sweep) then
      sweep = at
    end
  end
  local succeeded = first_score(Q.done[1])
  sweep_at(succeeded and succeeded + ms(policy.retention_succeeded))
  for i = 2, 4 do
    local finished = first_score(Q.done[i])
    sweep_at(finished and finished + ms(policy.retention_failed))
  end
  T.sweep = sweep
  return T
end

-- The queue's next due time from ``T`` (due_times), remembered in the queue hash's ``due``
-- field (what the global index is told; see the prelude). Sweeping is due no sooner than
-- ``sweep_every`` ms after now, so it comes in batches. Returns the due time, or false when
-- nothing is due ever.
local function reckon(hash, T, now, sweep_every)
  DUE.at = nil
  for kind, at in pairs(T) do
    if kind == 'sweep' then
      at = math.max(at, now + sweep_every)
    end
    due_at(at)
  end
  if DUE.at == nil then
    redis.call('HDEL', hash, 'due')
    return false
  end
  redis.call('HSET', hash, 'due', int(DUE.at))
  return int(DUE.at)
end

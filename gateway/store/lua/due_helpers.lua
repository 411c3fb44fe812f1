-- The reckoning of a queue's next due time (reckon_due.lua, recover.lua). ``Q`` has the keys:
-- hash (the queue hash), scheduled, running, stalls, dedup_exp, links, outbox, calls, and
-- done (the four finished sets: succeeded first, then failed, dead, cancelled).

-- The first score of a sorted set (nil: empty).
local function first_score(key)
  local found = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(found[2])
end

-- Work out when something of the queue is next due from its own sets, and remember it in the
-- queue hash's ``due`` field (what the global index is told; see the prelude). Sweeping (dedup
-- windows, finished tasks past retention) is due no sooner than ``sweep_every`` ms after now,
-- so it comes in batches. Returns the due time, or false when nothing is due ever.
local function reckon(Q, policy, now, sweep_every)
  DUE.at = nil
  local sweep_from = now + sweep_every
  local function sweep_at(at)
    if at then
      due_at(math.max(at, sweep_from))
    end
  end
  local watched = {Q.scheduled, Q.running, Q.calls}
  if policy.stall_policy == 'redispatch' then
    watched[4] = Q.stalls
  end
  for _, key in ipairs(watched) do
    local at = first_score(key)
    if at then
      due_at(at)
    end
  end
  local link = first_score(Q.links)
  if link then
    due_at(link + RELINK_AFTER_MS)
  end
  if redis.call('LLEN', Q.outbox) > 0 then
    due_at(now)
  end
  sweep_at(first_score(Q.dedup_exp))
  local succeeded = first_score(Q.done[1])
  if succeeded then
    sweep_at(succeeded + ms(policy.retention_succeeded))
  end
  for i = 2, 4 do
    local finished = first_score(Q.done[i])
    if finished then
      sweep_at(finished + ms(policy.retention_failed))
    end
  end
  if DUE.at == nil then
    redis.call('HDEL', Q.hash, 'due')
    return false
  end
  redis.call('HSET', Q.hash, 'due', int(DUE.at))
  return int(DUE.at)
end

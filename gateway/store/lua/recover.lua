-- The recoverer's first call on a due queue (gateway/background/queue_recovery.py): promote its
-- due scheduled tasks (promote.lua, below), then look at what else of the queue is due, without
-- changing it: expired leases, stalled attempts (stall policy ``redispatch``), an outbox to
-- deliver, cross-queue links to make again, durable calls whose lease ran out, finished tasks
-- past retention or a dedup window that ended. When nothing is, it reckons the queue's next due
-- time as reckon_due.lua does, so that a queue that was due only for its promotion costs this
-- one call (and the due index's settling); otherwise the caller does that work and reckons.
-- KEYS[1] .. KEYS[10] as promote.lua: meta, scheduled, ready, seq, queue hash, key_counts,
--   steps, waits, wait_shapes, calls
-- KEYS[11] running   KEYS[12] stalls   KEYS[13] dedup expiry   KEYS[14] links   KEYS[15] outbox
-- KEYS[16] done:succeeded   KEYS[17] done:failed   KEYS[18] done:dead   KEYS[19] done:cancelled
-- ARGV[1] .. ARGV[4] as promote.lua: now ms, most tasks to move, wake channel, queue name
-- ARGV[5] sweep interval ms (as reckon_due.lua's ARGV[2])
-- Returns {moved, the queue's stored policy (nil: no such queue), pending, due}: pending lists
-- the work found due ('promote' when the promotion moved its limit and more may be due,
-- 'expired', 'stalled', 'outbox', 'links', 'calls', 'sweep'); due is the reckoned time when
-- pending is empty (nil: nothing due ever), else nil (not reckoned).
--@promote
local moved = promote_main()
local now = tonumber(ARGV[1])
local raw = redis.call('HGET', KEYS[5], 'policy')
local policy = raw and cjson.decode(raw)
local function any(key, upto)
  return #redis.call('ZRANGEBYSCORE', key, '-inf', upto, 'LIMIT', 0, 1) > 0
end
local pending = {}
local function found(what, yes)
  if yes then
    pending[#pending + 1] = what
  end
end
found('promote', moved >= tonumber(ARGV[2]))
found('expired', any(KEYS[11], now))
found('stalled', policy and policy.stall_policy == 'redispatch' and any(KEYS[12], now))
found('outbox', redis.call('LLEN', KEYS[15]) > 0)
found('links', any(KEYS[14], now - RELINK_AFTER_MS))
found('calls', any(KEYS[10], now))
if policy then
  -- As the sweep reads its candidates (gateway/store/tasks/recovery.py, sweep_slot).
  local swept = any(KEYS[13], now) or any(KEYS[16], now - ms(policy.retention_succeeded))
  for i = 17, 19 do
    swept = swept or any(KEYS[i], now - ms(policy.retention_failed))
  end
  found('sweep', swept)
end
local due = false
if #pending == 0 and policy then
  due = reckon({
    hash = KEYS[5], scheduled = KEYS[2], running = KEYS[11], stalls = KEYS[12],
    dedup_exp = KEYS[13], links = KEYS[14], outbox = KEYS[15],
    done = {KEYS[16], KEYS[17], KEYS[18], KEYS[19]}, calls = KEYS[10],
  }, policy, now, tonumber(ARGV[5]))
end
return {moved, raw or false, pending, due}

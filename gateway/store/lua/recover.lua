-- The recoverer's first call on a due queue (gateway/background/queue_recovery.py): promote its
-- due scheduled tasks (promote.lua, below), then look at what else of the queue is due, without
-- changing it: expired leases, stalled attempts (stall policy ``redispatch``), an outbox to
-- deliver, cross-queue links to make again, durable calls whose lease ran out, finished tasks
-- past retention or a dedup window that ended (due_times, due_helpers.lua: one read of each
-- set). When nothing is, it reckons the queue's next due time from the same reads, as
-- reckon_due.lua does, so that a queue that was due only for its promotion costs this one call
-- (and the due index's settling); otherwise the caller does that work and reckons after it.
-- A queue without a policy (deleted) answers outbox, links and calls as pending: the caller
-- delivers what its outbox may still hold.
-- KEYS[1] .. KEYS[10] as promote.lua: meta, scheduled, ready, seq, queue hash, key_counts,
--   steps, waits, wait_shapes, calls
-- KEYS[11] running   KEYS[12] stalls   KEYS[13] dedup expiry   KEYS[14] links   KEYS[15] outbox
-- KEYS[16] done:succeeded   KEYS[17] done:failed   KEYS[18] done:dead   KEYS[19] done:cancelled
-- ARGV[1] .. ARGV[4] as promote.lua: now ms, most tasks to move, wake channel, queue name
-- ARGV[5] sweep interval ms (as reckon_due.lua's ARGV[2])
-- Returns {moved, the queue's stored policy (nil: no such queue), pending, due}: pending lists
-- the work found due ('promote' when scheduled tasks are still due: the promotion moved its limit,
-- 'expired', 'stalled', 'outbox', 'links', 'calls', 'sweep'); due is the reckoned time when
-- pending is empty (nil: nothing due ever), else nil (not reckoned).
--@promote
local moved = promote_main()
local now = tonumber(ARGV[1])
local raw = redis.call('HGET', KEYS[5], 'policy')
if not raw then
  return {moved, false, {'outbox', 'links', 'calls'}, false}
end
local Q = {
  hash = KEYS[5], scheduled = KEYS[2], running = KEYS[11], stalls = KEYS[12],
  dedup_exp = KEYS[13], links = KEYS[14], outbox = KEYS[15],
  done = {KEYS[16], KEYS[17], KEYS[18], KEYS[19]}, calls = KEYS[10],
}
local T = due_times(Q, cjson.decode(raw), now)
local pending = {}
for kind, at in pairs(T) do
  if at <= now then
    pending[#pending + 1] = kind
  end
end
local due = false
if #pending == 0 then
  due = reckon(KEYS[5], T, now, tonumber(ARGV[5]))
end
return {moved, raw, pending, due}

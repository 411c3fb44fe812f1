-- Work out when something of this queue is next due, from the queue's own sets, and remember it
-- in the queue hash's ``due`` field (what the global index is told; see the prelude). The
-- recoverer calls it after handling a queue that had more due than recover.lua's probe (which
-- reckons itself otherwise), and for every queue in its slow rescan.
-- KEYS[1] queue hash   KEYS[2] scheduled   KEYS[3] running   KEYS[4] stalls   KEYS[5] dedup expiry
-- KEYS[6] links   KEYS[7] outbox   KEYS[8] done:succeeded   KEYS[9] done:failed
-- KEYS[10] done:dead   KEYS[11] done:cancelled   KEYS[12] calls (durable HTTP calls' leases)
-- ARGV[1] now ms   ARGV[2] sweep interval ms: sweeping (dedup windows, finished tasks past
--         retention) is due no sooner than this long after now, so it comes in batches
-- Returns the due time in ms, or nil when nothing is due ever (or the queue is gone).
local policy = policy_of(KEYS[1])
if not policy then
  return false
end
local Q = {
  hash = KEYS[1], scheduled = KEYS[2], running = KEYS[3], stalls = KEYS[4],
  dedup_exp = KEYS[5], links = KEYS[6], outbox = KEYS[7],
  done = {KEYS[8], KEYS[9], KEYS[10], KEYS[11]}, calls = KEYS[12],
}
local now = tonumber(ARGV[1])
return reckon(KEYS[1], due_times(Q, policy, now), now, tonumber(ARGV[2]))

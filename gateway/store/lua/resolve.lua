-- Settle waiting tasks of this queue whose dependencies in other queues ended (the notices
-- another queue's outbox held, or a link that found its dependency ended already).
-- Idempotent: a notice for a dependency no longer awaited changes nothing.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] ready   KEYS[4] seq   KEYS[5] scheduled
-- KEYS[6] waiting   KEYS[7] dependents   KEYS[8] groups   KEYS[9] outbox   KEYS[10] done:failed
-- KEYS[11] done:dead   KEYS[12] notify   KEYS[13] key_counts (per-key concurrency: key_limits.lua)
-- ARGV[1] now ms   ARGV[2] done channel prefix   ARGV[3] queue name   ARGV[4] wake channel
-- ARGV[5..] four values per notice: waiting task id, dependency id, '1' if it succeeded else '0',
--           reason
-- Returns {the number of notices that changed a task, 1 when a completion callback notice was
-- recorded else 0}.
local policy = policy_of(KEYS[1])
if not policy then
  return {0, 0}
end
local now = tonumber(ARGV[1])
local Q = {
  name = ARGV[3], policy = policy, meta = KEYS[2], ready = KEYS[3], seq = KEYS[4],
  scheduled = KEYS[5], waiting = KEYS[6], dependents = KEYS[7], groups = KEYS[8],
  outbox = KEYS[9], failed = KEYS[10], dead = KEYS[11], notify = KEYS[12], channel = ARGV[2],
  now = now, counts = KEYS[13],
}
key_hooks(Q)
local was_empty = Q.none_ready()
local changed = 0
local ended = {}
for i = 5, #ARGV, 4 do
  if settle_one(Q, ARGV[i], ARGV[i + 1], ARGV[i + 2] == '1', ARGV[i + 3], ended) then
    changed = changed + 1
  end
end
settle_all(Q, ended)
if was_empty and not Q.none_ready() then
  redis.call('PUBLISH', ARGV[4], ARGV[3])
end
return {changed, Q.noticed and 1 or 0}

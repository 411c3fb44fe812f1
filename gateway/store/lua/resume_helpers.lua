-- Helpers of the scripts that resume a task waiting for a child (resume_child.lua) or a
-- durable HTTP call (resume_call.lua), appended after key_limits.lua by gateway/store/scripts.py
-- (they use it and the prelude).

-- Make scheduled task ``id`` (record ``t``, its step recorded and its wait cleared by the
-- caller) ready now, held behind its concurrency key's limit as promote.lua does, save it, and
-- tell the wake channel when the ready set was empty. ``R`` = {policy, meta, scheduled, ready,
-- seq, counts (key_counts), wake (channel), queue (name)}.
local function resume_now(R, id, t, now)
  redis.call('ZREM', R.scheduled, id)
  t.run_at = now
  local was_empty = redis.call('ZCARD', R.ready) == 0
  if t.ck then
    local K = key_hooks({
      policy = policy_of(R.policy) or {}, ready = R.ready, seq = R.seq, meta = R.meta,
      counts = R.counts,
    })
    was_empty = was_empty or ready_count(K) == 0
    key_admit(K, id, t)
  else
    make_ready(R.ready, R.seq, id, t)
  end
  save_task(R.meta, id, t)
  if was_empty then
    redis.call('PUBLISH', R.wake, R.queue)
  end
end

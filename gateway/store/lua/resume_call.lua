-- A durable HTTP call ended (an answer, or a failure the gateway records): resume its task
-- when the task still waits for that very call (scheduled, ``wt.k`` 'call', ``wt.s`` the step:
-- call.lua). Then, in this one script, the step is recorded with the call's result, the wait
-- is cleared, the call leaves the ``calls`` ZSET and the task is ready (held behind its
-- concurrency key's limit: resume_helpers.lua). A task resumed before (the call made twice:
-- a gateway thought stopped answered after all), timed out, cancelled or gone is left alone:
-- a call resumes its task once (docs/durable.md, "A durable HTTP call").
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] steps   KEYS[4] scheduled   KEYS[5] ready
-- KEYS[6] seq   KEYS[7] key_counts   KEYS[8] calls
-- ARGV[1] now ms   ARGV[2] the task's id   ARGV[3] the step   ARGV[4] the step's result (JSON)
-- ARGV[5] wake channel   ARGV[6] queue name
-- Returns 1 when it resumed the task, else 0.
local now = tonumber(ARGV[1])
local id = ARGV[2]
local t = load_task(KEYS[2], id)
local wt = t and t.wt
if not (wt and wt.k == 'call' and wt.s == ARGV[3] and t.state == 'scheduled') then
  if not (wt and wt.k == 'call') then
    redis.call('ZREM', KEYS[8], id)  -- (a call left behind by a task that moved on)
  end
  return 0
end
append_wait_step(KEYS[3], id, t, ARGV[4], 'call', now)
t.wt = nil
redis.call('ZREM', KEYS[8], id)
resume_now({
  policy = KEYS[1], meta = KEYS[2], scheduled = KEYS[4], ready = KEYS[5], seq = KEYS[6],
  counts = KEYS[7], wake = ARGV[5], queue = ARGV[6],
}, id, t, now)
return 1

-- A child task ended: resume its parent, when the parent still waits for that very child
-- (scheduled, ``wt.c`` its id: wait_helpers.lua). Then, in this one script, the wait's step is
-- recorded with the child's end as its result, the wait is cleared, and the task is ready (held
-- behind its concurrency key's limit: resume_helpers.lua). A parent resumed before (the same
-- end delivered twice), timed out, cancelled or gone is left alone: a child resumes its parent
-- once (docs/durable.md, "Invoking a task").
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] steps   KEYS[4] scheduled   KEYS[5] ready
-- KEYS[6] seq   KEYS[7] key_counts
-- ARGV[1] now ms   ARGV[2] the parent's id   ARGV[3] the child's id
-- ARGV[4] the step's result (JSON)   ARGV[5] wake channel   ARGV[6] queue name
-- Returns 1 when it resumed the parent, else 0.
local now = tonumber(ARGV[1])
local id = ARGV[2]
local t = load_task(KEYS[2], id)
local wt = t and t.wt
if not (wt and wt.c == ARGV[3] and t.state == 'scheduled') then
  return 0
end
append_wait_step(KEYS[3], id, t, ARGV[4], 'child', now)
t.wt = nil
resume_now({
  policy = KEYS[1], meta = KEYS[2], scheduled = KEYS[4], ready = KEYS[5], seq = KEYS[6],
  counts = KEYS[7], wake = ARGV[5], queue = ARGV[6],
}, id, t, now)
return 1

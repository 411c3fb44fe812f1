-- Invoke a child task (the ``invoke`` callback): end a running task's attempt as released (no
-- attempt spent) with the task scheduled until the invoke's timeout, exactly as a durable sleep
-- does (finish.lua, which the loader makes the function finish_main here), then, when that
-- left the task scheduled, record the wait for the child on it (``wt``: wait_helpers.lua) and
-- put the child's enqueue in the queue's outbox, in this one script: a gateway that stops
-- before it enqueues the child leaves the entry to the recoverer, which enqueues it then (the
-- child's id is derived from the parent's and the step's, so a second enqueue is a no-op:
-- gateway/services/invokes.py). After a cancel request the end cancels the task instead, and
-- nothing is recorded.
-- KEYS[1..22] finish.lua's (KEYS[18]: the outbox)
-- ARGV[1..5] finish.lua's (now ms, done channel prefix, queue name, wake channel, message)
-- ARGV[6..14] the end's nine words (finish.lua): task id, lease token, 'released', '', '', '',
--             the timeout in ms, '', ''
-- ARGV[15] step name   ARGV[16] the child's queue   ARGV[17] the child's id
-- ARGV[18] the step's result at the timeout (JSON)   ARGV[19] the outbox entry (JSON)
-- Returns finish.lua's reply.
local ALL = ARGV
local ARGV = {unpack(ALL, 1, 14)}  -- what finish.lua reads: one end
--@finish
local replies = finish_main()
local done = replies[1]
if done[1] == 'OK' and done[2] == 'scheduled' then
  local id = ARGV[6]
  local now = tonumber(ARGV[1])
  local t = load_task(KEYS[2], id)
  t.wt = {s = ALL[15], cq = ALL[16], c = ALL[17], tr = ALL[18], r = now}
  save_task(KEYS[2], id, t)
  redis.call('RPUSH', KEYS[18], ALL[19])
  due_at(now)
end
return replies

-- Wait for an event (the ``wait`` callback): end a running task's attempt as released (no
-- attempt spent) with the task scheduled until the wait's timeout, exactly as a durable sleep
-- does (finish.lua, which the loader makes the function finish_main here), then, when that
-- left the task scheduled, record the wait on it (``wt``) and index it (wait_helpers.lua), in
-- this one script: no event resume (resume.lua) can see the task scheduled without its wait.
-- After a cancel request the end cancels the task instead, and nothing is recorded.
-- KEYS[1..22] finish.lua's   KEYS[23] waits   KEYS[24] wait_shapes
-- ARGV[1..5] finish.lua's (now ms, done channel prefix, queue name, wake channel, message)
-- ARGV[6..14] the end's nine words (finish.lua): task id, lease token, 'released', '', '', '',
--             the timeout in ms, '', ''
-- ARGV[15] step name   ARGV[16] event name   ARGV[17] canonical match JSON
-- ARGV[18] the match's shape (canonical JSON of its sorted field names)   ARGV[19] lookback ms
-- Returns finish.lua's reply.
local ALL = ARGV
local ARGV = {unpack(ALL, 1, 14)}  -- what finish.lua reads: one end
--@finish
local replies = finish_main()
local done = replies[1]
if done[1] == 'OK' and done[2] == 'scheduled' then
  local id = ARGV[6]
  local t = load_task(KEYS[2], id)
  local wt = {
    s = ALL[15], e = ALL[16], m = ALL[17], h = ALL[18], r = tonumber(ARGV[1]),
    lb = tonumber(ALL[19]),
  }
  t.wt = wt
  save_task(KEYS[2], id, t)
  index_add({waits = KEYS[23], shapes = KEYS[24]}, 'w', id, wt.e, wt.m, wt.h)
end
return replies

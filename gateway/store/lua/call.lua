-- A durable HTTP call (the ``call`` callback; docs/durable.md, "A durable HTTP call"): end a
-- running task's attempt as released (no attempt spent) with the task scheduled until the
-- call's backstop, exactly as a durable sleep does (finish.lua, which the loader makes the
-- function finish_main here), then, when that left the task scheduled, record the wait for
-- the call on it (``wt``: wait_helpers.lua) and the call in the queue's ``calls`` ZSET, scored
-- by its lease expiry, in this one script: the gateway that took the callback makes the call
-- at once (renewing the lease); should it stop, the lease expires and the recoverer of any
-- gateway makes it again (claim_calls.lua). After a cancel request the end cancels the task
-- instead, and nothing is recorded.
-- KEYS[1..22] finish.lua's   KEYS[23] calls
-- ARGV[1..5] finish.lua's (now ms, done channel prefix, queue name, wake channel, message)
-- ARGV[6..14] the end's nine words (finish.lua): task id, lease token, 'released', '', '', '',
--             the backstop in ms, '', ''
-- ARGV[15] step name   ARGV[16] the request (CallIn's JSON)   ARGV[17] the call's lease expiry
-- ARGV[18] the step's result at the backstop (JSON)   ARGV[19] one try's timeout in ms
-- Returns finish.lua's reply.
local ALL = ARGV
local ARGV = {unpack(ALL, 1, 14)}  -- what finish.lua reads: one end
--@finish
local replies = finish_main()
local done = replies[1]
if done[1] == 'OK' and done[2] == 'scheduled' then
  local id = ARGV[6]
  local t = load_task(KEYS[2], id)
  t.wt = {s = ALL[15], k = 'call', q = ALL[16], tr = ALL[18], to = tonumber(ALL[19]),
    r = tonumber(ARGV[1])}
  save_task(KEYS[2], id, t)
  redis.call('ZADD', KEYS[23], ALL[17], id)
  due_at(tonumber(ALL[17]))
end
return replies

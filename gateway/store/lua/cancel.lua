-- Cancel a task. Queued, scheduled and waiting tasks end at once (and their dependents fail); a
-- running one is asked to stop (the next heartbeat answer says so), and the end of its attempt
-- decides (finish.lua): succeeded when the attempt succeeded, else cancelled.
-- A task cancelled while it waits for a child it invoked (``wt.c``: wait_helpers.lua) puts
-- "cancel this child" in its queue's outbox ({cc = the child's id, cq = its queue, p = this
-- task's id}), which the recoverer delivers to the child's queue (gateway/services/invokes.py):
-- a cancelled parent cancels its waiting child (docs/durable.md, "Invoking a task").
-- KEYS[1] meta   KEYS[2] ready   KEYS[3] scheduled   KEYS[4] done:cancelled   KEYS[5] queue hash
-- KEYS[6] seq   KEYS[7] waiting   KEYS[8] dependents   KEYS[9] groups   KEYS[10] outbox
-- KEYS[11] done:failed   KEYS[12] done:dead   KEYS[13] notify
-- KEYS[14] key_counts (per-key concurrency: key_limits.lua)   KEYS[15] waits
-- KEYS[16] wait_shapes (a task cancelled at once leaves the waits index: its wait for an
-- event and its cancel_on entries; wait_helpers.lua)   KEYS[17] calls (and the calls ZSET:
-- its durable HTTP call)
-- ARGV[1] task id   ARGV[2] now ms   ARGV[3] done channel prefix   ARGV[4] queue name
-- ARGV[5] wake channel: told the queue name when cancelling a queued task of a concurrency key
--         moved the key's next held task to the ready set
-- Returns what it did, which a bulk cancel counts by (gateway/services/bulk.py):
--      {'CANCELLED'} (then 'NOTICE' when a completion callback notice was recorded)
--      | {'REQUESTED'} (it is running) | {'FINISHED', state it ended in} | {'NOTASK'}
--      or {'NOQUEUE'} (the queue is not registered)
local policy = policy_of(KEYS[5])
if not policy then
  return {'NOQUEUE'}
end
local id = ARGV[1]
local t = load_task(KEYS[1], id)
if not t then
  return {'NOTASK'}
end
if t.state == 'running' then
  t.cancel = true
  save_task(KEYS[1], id, t)
  return {'REQUESTED'}
end
local counted = false  -- a task of a concurrency key, in the ready set proper
if t.state == 'queued' then
  redis.call('ZREM', KEYS[2], ready_member(id, t))
  counted = t.ck ~= nil and not is_held(t)
  left_ready(t)
elseif t.state == 'scheduled' then
  redis.call('ZREM', KEYS[3], id)
elseif t.state == 'waiting' then
  redis.call('ZREM', KEYS[7], id)
  t.wait = nil
else
  return {'FINISHED', t.state}
end
local child = t.wt and t.wt.c and t.wt
if t.wt or t.co then
  unindex_waits({waits = KEYS[15], shapes = KEYS[16], calls = KEYS[17]}, id, t)
end
local now = tonumber(ARGV[2])
local Q = {
  name = ARGV[4], policy = policy, meta = KEYS[1], ready = KEYS[2], seq = KEYS[6],
  scheduled = KEYS[3], waiting = KEYS[7], dependents = KEYS[8], groups = KEYS[9],
  outbox = KEYS[10], failed = KEYS[11], dead = KEYS[12], notify = KEYS[13], channel = ARGV[3],
  now = now, counts = KEYS[14],
}
key_hooks(Q)
if counted then
  local was_empty = Q.none_ready()
  key_left(Q, t, now)
  if was_empty and (Q.moved or 0) > 0 then
    redis.call('PUBLISH', ARGV[5], ARGV[4])
  end
end
t.state = 'cancelled'
t.cancel = true
t.finished = now
record_notice(Q, id, t)
if t.jb then
  record_run_end(Q, id, t)
end
if t.par then
  record_child_end(Q, id, t, nil)
end
if child then
  redis.call('RPUSH', KEYS[10], cjson.encode({cc = child.c, cq = child.cq, p = id}))
  due_at(now)
end
save_task(KEYS[1], id, t)
redis.call('ZADD', KEYS[4], int(now), id)
redis.call('PUBLISH', ARGV[3] .. id, 'cancelled')
settle_all(Q, {{id, false, 'cancelled', t.grp}})
if Q.noticed then
  return {'CANCELLED', 'NOTICE'}
end
return {'CANCELLED'}

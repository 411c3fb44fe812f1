-- Move scheduled tasks whose time has come into the ready set.
-- KEYS[1] meta   KEYS[2] scheduled   KEYS[3] ready   KEYS[4] seq   KEYS[5] queue hash
-- KEYS[6] key_counts (a task of a concurrency key is admitted: key_limits.lua; the policy is
-- read only when such a task is due)
-- KEYS[7] steps   KEYS[8] waits   KEYS[9] wait_shapes   KEYS[10] calls (a task waiting for
-- an event whose timeout came: its step is recorded with the result null (a wait for a child
-- or a call: its ``tr``), and its index entries (a call's entry) removed: wait_helpers.lua; a
-- task without a wait pays one field test)
-- ARGV[1] now ms   ARGV[2] most tasks to move   ARGV[3] wake channel   ARGV[4] queue name
-- Returns the number of tasks moved (entries of tasks no longer scheduled are dropped).
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then
  return 0
end
local was_empty = redis.call('ZCARD', KEYS[3]) == 0
local moved = 0
local K = nil
for _, id in ipairs(due) do
  local t = load_task(KEYS[1], id)
  if t and t.wt and t.state == 'scheduled' then
    append_wait_step(KEYS[7], id, t, t.wt.tr or 'null', 'timeout', tonumber(ARGV[1]))
    unwait({waits = KEYS[8], shapes = KEYS[9], calls = KEYS[10]}, id, t)
  end
  if t and t.state == 'scheduled' and t.ck then
    if K == nil then
      K = key_hooks({
        policy = policy_of(KEYS[5]) or {}, ready = KEYS[3], seq = KEYS[4], meta = KEYS[1],
        counts = KEYS[6],
      })
      -- Held tasks alone are nothing to claim (the tasks moved so far are all claimable).
      was_empty = was_empty or ready_count(K) == moved
    end
    key_admit(K, id, t)
    save_task(KEYS[1], id, t)
    moved = moved + 1
  elseif t and t.state == 'scheduled' then
    make_ready(KEYS[3], KEYS[4], id, t)
    save_task(KEYS[1], id, t)
    moved = moved + 1
  end
end
redis.call('ZREM', KEYS[2], unpack(due))
if was_empty and moved > 0 then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return moved

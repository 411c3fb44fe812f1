-- Move scheduled tasks whose time has come into the ready set.
-- KEYS[1] meta   KEYS[2] scheduled   KEYS[3] ready   KEYS[4] seq
-- ARGV[1] now ms   ARGV[2] most tasks to move   ARGV[3] wake channel   ARGV[4] queue name
-- Returns the number of tasks moved (entries of tasks no longer scheduled are dropped).
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then
  return 0
end
local was_empty = redis.call('ZCARD', KEYS[3]) == 0
local moved = 0
for _, id in ipairs(due) do
  local t = load_task(KEYS[1], id)
  if t and t.state == 'scheduled' then
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

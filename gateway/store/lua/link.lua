-- Register a waiting task of another queue as a dependent of a task of this queue, unless that
-- task has ended already: then the caller settles the dependent itself.
-- KEYS[1] meta   KEYS[2] dependents
-- ARGV[1] dependency id (in this queue)   ARGV[2] dependent's queue   ARGV[3] dependent's id
-- Returns {'PENDING'} | {'ENDED', state, reason} | {'NOTASK'}
local t = load_task(KEYS[1], ARGV[1])
if not t then
  return {'NOTASK'}
end
if t.state == 'succeeded' or t.state == 'failed' or t.state == 'dead' or t.state == 'cancelled' then
  return {'ENDED', t.state, t.error or t.state}
end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if raw then
  for _, entry in ipairs(cjson.decode(raw)) do
    if entry[1] == ARGV[2] and entry[2] == ARGV[3] then
      return {'PENDING'}
    end
  end
end
add_dependent(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return {'PENDING'}

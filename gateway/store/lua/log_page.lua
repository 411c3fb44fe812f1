-- Read one page of a task's log lines (changes nothing). Lines are numbered from the task's
-- first line, so a page asked for by number stays right while older lines are dropped.
-- KEYS[1] meta   KEYS[2] the task's log list
-- ARGV[1] task id   ARGV[2] number of the first line wanted   ARGV[3] most lines
-- Returns {'OK', lines dropped (the number of the first kept line), lines kept, lines...}
--      or {'NOTASK'}
local t = load_task(KEYS[1], ARGV[1])
if not t then
  return {'NOTASK'}
end
local dropped = t.logd or 0
local kept = redis.call('LLEN', KEYS[2])
local from = math.max(tonumber(ARGV[2]) - dropped, 0)
local out = {'OK', dropped, kept}
if tonumber(ARGV[3]) > 0 and from < kept then
  for _, line in ipairs(redis.call('LRANGE', KEYS[2], from, from + tonumber(ARGV[3]) - 1)) do
    out[#out + 1] = line
  end
end
return out

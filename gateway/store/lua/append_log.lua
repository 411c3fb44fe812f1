-- Append log lines to a running task's log, fenced by its lease token. The log keeps the last
-- ARGV[3] lines: older ones are dropped, and counted in the task record (logd), so a reader is
-- told how many are missing. The log list expires with the task: the queue's longest retention
-- plus its max run time after the last line.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] the task's log list
-- ARGV[1] task id   ARGV[2] lease token   ARGV[3] max lines kept   ARGV[4..] log lines (JSON)
-- Returns {'OK', lines kept, lines dropped so far} | {'NOTASK'} | {'STALE', state}
--      or {'NOQUEUE'} (the queue is not registered)
local policy = policy_of(KEYS[1])
if not policy then
  return {'NOQUEUE'}
end
local t, refusal = fenced(KEYS[2], ARGV[1], ARGV[2])
if not t then
  return refusal
end
local kept = 0
for i = 4, #ARGV do
  kept = redis.call('RPUSH', KEYS[3], ARGV[i])
end
local cap = tonumber(ARGV[3])
if kept > cap then
  redis.call('LTRIM', KEYS[3], -cap, -1)
  t.logd = (t.logd or 0) + kept - cap
  kept = cap
  save_task(KEYS[2], ARGV[1], t)
end
local keep = math.max(policy.retention_succeeded, policy.retention_failed) + policy.max_run_time
redis.call('PEXPIRE', KEYS[3], ms(keep))
return {'OK', kept, t.logd or 0}

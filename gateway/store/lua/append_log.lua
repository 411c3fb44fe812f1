-- Append log lines to a running task's log, fenced by its lease token. The log list expires
-- with the task: the queue's longest retention plus its max run time after the last line.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] the task's log list
-- ARGV[1] task id   ARGV[2] lease token   ARGV[3] max lines kept   ARGV[4..] log lines (JSON)
-- Returns {'OK', lines kept} | {'NOTASK'} | {'STALE', state}
--      or {'NOQUEUE'} (the queue is not registered)
local policy = policy_of(KEYS[1])
if not policy then
  return {'NOQUEUE'}
end
local t, refusal = fenced(KEYS[2], ARGV[1], ARGV[2])
if not t then
  return refusal
end
for i = 4, #ARGV do
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
redis.call('LTRIM', KEYS[3], -tonumber(ARGV[3]), -1)
local keep = math.max(policy.retention_succeeded, policy.retention_failed) + policy.max_run_time
redis.call('PEXPIRE', KEYS[3], ms(keep))
return {'OK', redis.call('LLEN', KEYS[3])}

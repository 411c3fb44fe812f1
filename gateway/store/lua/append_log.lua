-- Append log lines to a running task's log, fenced by its lease token.
-- KEYS[1] meta   KEYS[2] the task's log list
-- ARGV[1] task id   ARGV[2] lease token   ARGV[3] max lines kept   ARGV[4] log expiry ms
-- ARGV[5..] log lines (JSON)
-- Returns {'OK', lines kept} | {'NOTASK'} | {'STALE', state}
local t, refusal = fenced(KEYS[1], ARGV[1], ARGV[2])
if not t then
  return refusal
end
for i = 5, #ARGV do
  redis.call('RPUSH', KEYS[2], ARGV[i])
end
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'OK', redis.call('LLEN', KEYS[2])}

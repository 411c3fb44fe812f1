-- Record how one delivery of a completion callback notice went: delivered; to be tried again
-- at a given time; or given up (failed). Fenced by the try it claimed: a delivery whose lease
-- ran out, and whose notice was claimed again meanwhile, changes nothing.
-- KEYS[1] meta   KEYS[2] notify
-- ARGV[1] task id   ARGV[2] the task's finished ms (which end the notice tells of)
-- ARGV[3] try number (ntc.n when claimed)   ARGV[4] 'delivered' | 'retry' | 'failed'
-- ARGV[5] now ms   ARGV[6] ms of the next try (retry)   ARGV[7] error text ('' when delivered)
-- Returns {'OK'} | {'STALE'}
local id = ARGV[1]
local t = load_task(KEYS[1], id)
if not t or not t.ntc or t.ntc.st ~= 'pending' or t.finished ~= tonumber(ARGV[2])
    or t.ntc.n ~= tonumber(ARGV[3]) then
  return {'STALE'}
end
local outcome = ARGV[4]
if ARGV[7] ~= '' then
  t.ntc.le = ARGV[7]
end
if outcome == 'retry' then
  t.ntc.due = tonumber(ARGV[6])
  redis.call('ZADD', KEYS[2], ARGV[6], id)
else
  t.ntc.st = outcome
  t.ntc.due = nil
  if outcome == 'delivered' then
    t.ntc.at = tonumber(ARGV[5])
  end
  redis.call('ZREM', KEYS[2], id)
end
save_task(KEYS[1], id, t)
return {'OK'}

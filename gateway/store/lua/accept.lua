-- Record that endpoints accepted attempts (answered the push 202): each goes on under its lease,
-- kept alive by heartbeats, and from now on its lease running out counts against the endpoint
-- (finish.lua). The time to the answer feeds the endpoint's answer time (health.lua).
-- Many acceptances in one call, each fenced by its own lease token.
-- KEYS[1] meta   KEYS[2] endpoints   KEYS[3] health
-- ARGV[1] now ms   ARGV[2..] two values per task: task id, lease token
-- Returns, per task: {'OK'} | {'NOTASK'} | {'STALE', state}
local now = tonumber(ARGV[1])
local healths = {}
local replies = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local t, refusal = fenced(KEYS[1], id, ARGV[i + 1])
  if not t then
    replies[#replies + 1] = refusal
  else
    if not t.acc then
      t.acc = now
      save_task(KEYS[1], id, t)
      if redis.call('HEXISTS', KEYS[2], t.ep) == 1 then
        health_sample(health_of(healths, KEYS[3], t.ep), now, now - t.started, nil)
      end
    end
    replies[#replies + 1] = {'OK'}
  end
end
health_save(healths, KEYS[3])
return replies

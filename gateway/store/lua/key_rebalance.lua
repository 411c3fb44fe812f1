-- After a queue's policy changed (PUT or PATCH): move held tasks of every concurrency key to
-- the ready set while the key has room under the policy's key_concurrency now (all of them
-- when the policy has none). See key_limits.lua. One step per key with held tasks.
-- KEYS[1] queue hash   KEYS[2] meta   KEYS[3] ready   KEYS[4] seq   KEYS[5] key_counts
-- ARGV[1] now ms   ARGV[2] wake channel   ARGV[3] queue name
-- Returns the number of tasks moved; publishes the queue name on the wake channel when the
-- ready set had nothing to claim before.
local policy = policy_of(KEYS[1])
if not policy then
  return 0
end
local first = redis.call('ZRANGEBYLEX', KEYS[3], '[~', '+', 'LIMIT', 0, 1)[1]
if not first then
  return 0
end
local now = tonumber(ARGV[1])
local K = key_hooks({
  policy = policy, ready = KEYS[3], seq = KEYS[4], meta = KEYS[2], counts = KEYS[5],
})
local was_empty = ready_count(K) == 0
local moved = 0
local member = first
while member do
  local ck = string.sub(member, 6, 5 + tonumber(string.sub(member, 2, 5), 16))
  local room = redis.call('ZLEXCOUNT', KEYS[3], '[' .. held_prefix(ck), '(' .. held_prefix(ck) .. '~')
  if K.limit ~= nil then
    room = math.min(room, K.limit - tonumber(redis.call('HGET', KEYS[5], ck) or '0'))
  end
  moved = moved + key_promote(K, ck, room, now)
  member = redis.call('ZRANGEBYLEX', KEYS[3], '(' .. held_prefix(ck) .. '~', '+', 'LIMIT', 0, 1)[1]
end
if was_empty and moved > 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return moved

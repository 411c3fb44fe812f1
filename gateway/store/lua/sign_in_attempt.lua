-- A sign-in attempt: spend the form's nonce, and count the attempt against its client address.
-- KEYS[1]  the nonce's mark (jg:{signin}:nonce:<sha256 of the nonce>): STR, set once spent
-- KEYS[2]  the address's record (jg:{signin}:addr:<address>): HASH n (attempts counted since
--          the record was made), until (ms: no attempt is taken before then)
-- ARGV[1]  now, ms
-- ARGV[2]  how long a spent nonce is remembered, ms (as long as the form's cookie lives)
-- ARGV[3]  attempts taken without delay
-- ARGV[4]  the record is forgotten this long after its last attempt (or delay), ms
-- ARGV[5]  the first delay, ms: it doubles with each further attempt
-- ARGV[6]  the longest delay, ms
-- Returns {1, ms}: the address must wait ms more (nothing is counted, the nonce is not spent);
-- {0, 0}: the nonce was spent already; {2, 0}: go on and check the key. The attempt is counted
-- before the key is checked, so attempts sent all at once are counted all the same; a sign-in
-- that succeeds deletes the record.
local now = tonumber(ARGV[1])
local blocked = tonumber(redis.call('HGET', KEYS[2], 'until') or '0')
if blocked > now then
  return {1, blocked - now}
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then
  return {0, 0}
end
local n = redis.call('HINCRBY', KEYS[2], 'n', 1)
local free = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
if n > free then
  local delay = math.min(tonumber(ARGV[5]) * 2 ^ math.min(n - free - 1, 40), tonumber(ARGV[6]))
  redis.call('HSET', KEYS[2], 'until', now + delay)
  keep = keep + delay
end
redis.call('PEXPIRE', KEYS[2], keep)
return {2, 0}

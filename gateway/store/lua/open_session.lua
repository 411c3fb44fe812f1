-- Record an admin UI session of one API key, forgetting the key's sessions that have ended.
-- KEYS[1]  the key's sessions (jg:sessions:<key fingerprint>): ZSET session id -> expiry ms
-- ARGV[1]  now, ms
-- ARGV[2]  the new session's id
-- ARGV[3]  its lifetime, ms
-- ARGV[4]  most sessions kept per key: past it, the oldest are ended
-- The key expires with its last session, so a key nobody signs in with leaves nothing.
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -1 - tonumber(ARGV[4]))
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1

-- Change some fields of a queue's policy in place (no read-modify-write across round trips).
-- Top-level fields are independent of each other, so a patch valid on its own keeps the policy
-- valid; nested objects (backoff) are replaced whole.
-- The queue is also made due now in its ``due`` field (see the prelude), as its due times may
-- move with the policy (retention, stall policy); the caller then tells the due index.
-- KEYS[1] queue hash
-- ARGV[1] JSON object of the fields to change   ARGV[2] now ms
-- Returns the new policy JSON, or false when the queue does not exist.
local policy = policy_of(KEYS[1])
if not policy then
  return false
end
for field, value in pairs(cjson.decode(ARGV[1])) do
  policy[field] = value
end
local encoded = cjson.encode(policy)
redis.call('HSET', KEYS[1], 'policy', encoded, 'due', ARGV[2])
return encoded

-- Replace the task list an endpoint reported (its part of the task catalog), if it exists.
-- KEYS[1] endpoints   KEYS[2] catalog
-- ARGV[1] endpoint id
-- ARGV[2] the list as stored: JSON {"at": ms, "tasks": [{name, schema, description}]}
-- Returns 1 when stored, 0 when the endpoint is not registered (nothing is written).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1

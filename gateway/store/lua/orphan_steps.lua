-- Drop the durable steps of tasks that are gone, a part of a queue's steps hash at a time: what
-- versions before the sweep and clean deleted them in their own script left when the gateway
-- stopped between that script and its next round trip (gateway/store/orphans.py). A steps
-- field without a record is always garbage: step.lua records only for a running task, in the
-- same script that checks its record, and every script that deletes a record deletes its
-- steps with it. Reads the values too (HSCAN has no NOVALUES before Redis 7.4): ARGV[2] keeps
-- the Lua memory of one call small.
-- KEYS[1] meta   KEYS[2] steps
-- ARGV[1] HSCAN cursor ('0' to start)   ARGV[2] HSCAN COUNT
-- Returns {next cursor ('0' when the hash has been walked), fields dropped}
local scan = redis.call('HSCAN', KEYS[2], ARGV[1], 'COUNT', tonumber(ARGV[2]))
local entries = scan[2]
local gone = {}
for i = 1, #entries, 2 do
  if redis.call('HEXISTS', KEYS[1], entries[i]) == 0 then
    gone[#gone + 1] = entries[i]
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[2], unpack(gone))
end
return {scan[1], #gone}

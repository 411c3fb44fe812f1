-- Settle an Idempotency-Key record this request holds: keep its answer, or let the key go.
-- KEYS[1]  the record (jg:idem:<hash>)
-- ARGV[1]  the in-progress marker this request set, exactly as it was set
-- ARGV[2]  the answer record to keep, or '' to delete the record (nothing was done)
-- ARGV[3]  how long to keep the answer, ms
-- Returns 1 when the record was still this request's marker, else 0 and nothing changes: the
-- marker expired while the request ran, and another request may hold the key by now.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1

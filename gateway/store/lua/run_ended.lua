-- Keep the ends of runs with their records (gateway/store/run_ends.py): each in field
-- '<run id>:end' of the job's run records hash, beside the record. An end is kept only while
-- the run's record exists (a deleted or pruned run keeps none), and never over a later one: a
-- resubmitted run's task ends again later, and two deliveries of an outbox may interleave.
-- Idempotent.
-- KEYS[1] run records (HASH)
-- ARGV[1..] two values per end: run id, end JSON (the task record's state, att, first,
--           finished, error and warn; finished in ms)
-- Returns how many ends were written.
local written = 0
for i = 1, #ARGV, 2 do
  local id, given = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[1], id) == 1 then
    local field = id .. ':end'
    local kept = redis.call('HGET', KEYS[1], field)
    if not kept or (cjson.decode(kept).finished or 0) <= (cjson.decode(given).finished or 0) then
      redis.call('HSET', KEYS[1], field, given)
      written = written + 1
    end
  end
end
return written

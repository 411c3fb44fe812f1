-- A read, not a change: the next members of a ZSET in order, resuming after a given member.
-- One script so that finding where the last page stopped and reading on are one atomic step: a
-- member removed before that point meanwhile (a task swept, resubmitted, promoted) cannot make
-- the walk skip or repeat one.
-- KEYS[1] the ZSET
-- ARGV[1] lowest score, inclusive ('-inf' for none; used only without ARGV[4])
-- ARGV[2] end score, exclusive ('' for none)   ARGV[3] most members returned
-- ARGV[4] the member to resume after ('' to start at ARGV[1])   ARGV[5] its score
-- Returns {member, score, member, score, ...} in order.
local key = KEYS[1]
local before = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local after = ARGV[4]
local high = '+inf'
if before then
  high = '(' .. ARGV[2]
end
if after == '' then
  return redis.call('ZRANGEBYSCORE', key, ARGV[1], high, 'WITHSCORES', 'LIMIT', 0, count)
end

local out = {}
local function keep(rows)
  for i = 1, #rows, 2 do
    if #out >= count * 2 then
      return
    end
    if before and tonumber(rows[i + 1]) >= before then
      return
    end
    out[#out + 1] = rows[i]
    out[#out + 1] = rows[i + 1]
  end
end

local score = redis.call('ZSCORE', key, after)
if score and tonumber(score) == tonumber(ARGV[5]) then
  -- Still in place: read on from its rank, O(log n).
  local rank = redis.call('ZRANK', key, after)
  keep(redis.call('ZRANGE', key, rank + 1, rank + count, 'WITHSCORES'))
  return out
end
-- It left (or moved): read on by score, passing over its equals that sort before it.
local from = tonumber(ARGV[5])
local offset = 0
while #out < count * 2 do
  local rows = redis.call('ZRANGEBYSCORE', key, ARGV[5], high, 'WITHSCORES', 'LIMIT', offset, count)
  local later = {}
  for i = 1, #rows, 2 do
    if tonumber(rows[i + 1]) > from or rows[i] > after then
      later[#later + 1] = rows[i]
      later[#later + 1] = rows[i + 1]
    end
  end
  keep(later)
  offset = offset + #rows / 2
  if #rows < count * 2 then
    break
  end
end
return out

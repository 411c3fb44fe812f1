-- The ready set's members, prepended (before the prelude, whose helpers use them) to every
-- script that names them by gateway/store/scripts.py.
--
-- Ready set: one ZSET, every score 0, ordered by member. A member is the task's required
-- capability ('' for none), '/', its place in 17 characters (order_of) and the id: ZRANGEBYLEX
-- over one capability's prefix gives priority, then run_at, then FIFO, in O(log n). '/' is not
-- allowed in capabilities.
local function ready_prefix(cap)
  return (cap or '') .. '/'
end

local function ready_head(ready_key, cap)
  local p = ready_prefix(cap)
  local m = redis.call('ZRANGEBYLEX', ready_key, '[' .. p, '(' .. (cap or '') .. '0', 'LIMIT', 0, 1)
  return m[1]
end

-- The low 8 base-64 digits of ``x`` (whole, below 2^53), each a byte from '?' (0) to '~' (63),
-- most significant first, after what is left above them (x / 2^48, whole). Unrolled, by
-- arithmetic alone: a loop into a table cost the enqueue 18 % more instructions, a math.floor
-- per digit 11 % (bench/HISTORY.md, "The ready member in 17 characters").
local function digits8(x)
  local d0 = x % 64
  x = (x - d0) / 64
  local d1 = x % 64
  x = (x - d1) / 64
  local d2 = x % 64
  x = (x - d2) / 64
  local d3 = x % 64
  x = (x - d3) / 64
  local d4 = x % 64
  x = (x - d4) / 64
  local d5 = x % 64
  x = (x - d5) / 64
  local d6 = x % 64
  x = (x - d6) / 64
  local d7 = x % 64
  return (x - d7) / 64, 63 + d7, 63 + d6, 63 + d5, 63 + d4, 63 + d3, 63 + d2, 63 + d1, 63 + d0
end

-- A task's place in the ready set, 17 of digits8's digits, in ASCII order, so members compare
-- as their numbers do: rank (1000 - priority, 0 to 2000) and run_at (ms, below 2^42: until the
-- year 2109) as one number, rank * 2^42 + run_at (below 2^53, so exact), in 9 digits, then the
-- sequence number (below 2^48) in 8. Members written before (old_order: 3 + 11 + 12 hex
-- digits, sq in the record) begin with '0'-'7', below every digit here, so they sort first in
-- their capability's part until reshape.lua rewrites them; both end with the id.
local function order_of(rank, run_at, seq)
  local top, a7, a6, a5, a4, a3, a2, a1, a0 = digits8(rank * 4398046511104 + run_at)
  return string.char(63 + top, a7, a6, a5, a4, a3, a2, a1, a0, select(2, digits8(seq)))
end

local function old_order(rank, run_at, seq)
  return string.format('%03x%011x%012x', rank, run_at, seq)
end

local function member_of(id, t, seq)
  return ready_prefix(t.cap) .. order_of(1000 - t.prio, t.run_at, seq) .. id
end

-- Put a task in the ready set. The record keeps the sequence number (sn), not the member: the
-- member is made again from the record when needed (ready_member), so a queued task's record
-- does not carry its 40-odd characters twice.
local function make_ready(ready_key, seq_key, id, t)
  local seq = redis.call('INCR', seq_key)
  t.m = nil
  t.sq = nil
  t.sn = seq
  t.state = 'queued'
  redis.call('ZADD', ready_key, 0, member_of(id, t, seq))
end

-- A queued task's ready-set member: the one it holds (m), the older shape while it has sq (an
-- older gateway queued it and reshape.lua has not rewritten it yet), else made from sn.
local function ready_member(id, t)
  if t.m then
    return t.m
  end
  if t.sq then
    return ready_prefix(t.cap) .. old_order(1000 - t.prio, t.run_at, t.sq) .. id
  end
  return member_of(id, t, t.sn)
end

-- Forget a task's place in the ready set (it left it).
local function left_ready(t)
  t.m = nil
  t.sq = nil
  t.sn = nil
end

-- The id inside a ready-set member (ids are ULIDs: 26 characters).
local function member_id(member)
  return string.sub(member, -26)
end


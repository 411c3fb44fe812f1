-- Rewrite ready-set members of the older shape (3 + 11 + 12 hex digits after the capability's
-- '/', written by gateways before the 17-character place of prelude.lua's order_of) into the
-- current one, at most ARGV[1] of them: each is removed and added again with the same rank,
-- run_at and sequence number, and its record's sq becomes sn (or its held member m, when the
-- record keeps one, the new member). Idempotent: a member of the current shape is never
-- read, so a call after a kill goes on where the last one stopped. Held members ('~' ...) are
-- left as they are: the record names them, and each is rewritten when its key promotes it.
-- KEYS[1] meta   KEYS[2] ready   KEYS[3] capabilities
-- ARGV[1] most members to rewrite
-- Returns how many it rewrote (fewer than ARGV[1]: none of the older shape is left).
local limit = tonumber(ARGV[1])
local prefixes = redis.call('SMEMBERS', KEYS[3])
prefixes[#prefixes + 1] = ''
local done = 0
for _, cap in ipairs(prefixes) do
  local p = ready_prefix(cap)
  -- Older members begin '0'-'7' after the prefix; every current one '?' or above.
  local old = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. p, '(' .. p .. '?', 'LIMIT', 0, limit - done)
  for _, member in ipairs(old) do
    local rest = string.sub(member, #p + 1)
    local rank = tonumber(string.sub(rest, 1, 3), 16)
    local run_at = tonumber(string.sub(rest, 4, 14), 16)
    local seq = tonumber(string.sub(rest, 15, 26), 16)
    local id = string.sub(rest, 27)
    if not (rank and run_at and seq) or #id ~= 26 then
      return done  -- not a member of either shape: left alone, and the pass ends here
    end
    local member_now = p .. order_of(rank, run_at, seq) .. id
    redis.call('ZREM', KEYS[2], member)
    redis.call('ZADD', KEYS[2], 0, member_now)
    local t = load_task(KEYS[1], id)
    if t and t.m == member then
      t.m = member_now
      t.sn, t.sq = seq, nil
      save_task(KEYS[1], id, t)
    elseif t and t.sq == seq then
      t.sn, t.sq = seq, nil
      save_task(KEYS[1], id, t)
    end
    done = done + 1
  end
  if done >= limit then
    break
  end
end
return done

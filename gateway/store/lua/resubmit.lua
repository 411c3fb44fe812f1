-- Move dead tasks of one queue back to its ready set: an operator's resubmit, or a pass of the
-- queue's redrive policy (gateway/background/redriver.py). Only tasks whose state is 'dead' move; their
-- attempt history (``hist`` and the attempts hash) is kept.
-- KEYS[1] meta   KEYS[2] ready   KEYS[3] seq   KEYS[4] done:dead   KEYS[5] attempts
-- KEYS[6] queue hash   KEYS[7] key_counts (a task of a concurrency key is admitted:
-- key_limits.lua; the policy is read only for such a task)
-- ARGV[1] now ms
-- ARGV[2] mode: '1' (operator; start the attempt count again) | '0' (operator; keep it) |
--         'redrive' (the redrive policy)
-- ARGV[3] wake channel   ARGV[4] queue name
-- ARGV[5] redrive only (else ''): most redrives of one task (the policy's max_redrives)
-- ARGV[6] redrive only (else ''): the failure kinds redriven, separated by spaces
-- ARGV[7] redrive only (else ''): ms; only tasks that died before it move
-- ARGV[8..] task ids
-- A redrive moves a dead task only when its last failure's kind (``fk``, set by finish.lua) is
-- one of ARGV[6], it died (``finished``) before ARGV[7] and it was redriven (``rd``) fewer than
-- ARGV[5] times. It counts the redrive in ``rd``, starts the attempt count again (the task gets
-- max_attempts new attempts, as an operator's reset does) and appends a history entry with
-- outcome 'redriven' to the attempts hash, so the task's page shows it.
-- Returns, per id in order: {'OK'} | {'NOTASK'} | {'NOTDEAD', state}
--   | {'NOMATCH', why} (redrive only; why: 'kind' | 'young' | 'cap')
-- Publishes the queue name on the wake channel when the ready set stops being empty.
local now = tonumber(ARGV[1])
local redrive = ARGV[2] == 'redrive'
local reset = ARGV[2] == '1' or redrive
local max_redrives = tonumber(ARGV[5])
local died_before = tonumber(ARGV[7])
local kinds = {}
for kind in string.gmatch(ARGV[6], '%S+') do
  kinds[kind] = true
end
local was_empty = redis.call('ZCARD', KEYS[2]) == 0
local replies = {}
local moved = 0
local K = nil

-- Why the redrive policy leaves dead task ``t`` where it is, or nil when it moves it.
local function mismatch(t)
  if not t.fk or not kinds[t.fk] then
    return 'kind'
  end
  if not t.finished or t.finished >= died_before then
    return 'young'
  end
  if (t.rd or 0) >= max_redrives then
    return 'cap'
  end
  return nil
end

-- Record the redrive of ``t`` in its history, as one more entry after its attempts.
local function record_redrive(id, t)
  t.rd = (t.rd or 0) + 1
  t.hist = t.hist + 1
  local entry = {
    n = t.att, started = now, ended = now, outcome = 'redriven', kind = t.fk,
    error = 'redriven automatically after a ' .. t.fk .. ' failure (redrive ' .. t.rd ..
      ' of ' .. max_redrives .. ')',
  }
  redis.call('HSET', KEYS[5], id .. ':' .. t.hist, cjson.encode(entry))
end

for i = 8, #ARGV do
  local id = ARGV[i]
  local t = load_task(KEYS[1], id)
  local why = nil
  if not t then
    replies[#replies + 1] = {'NOTASK'}
  elseif t.state ~= 'dead' then
    replies[#replies + 1] = {'NOTDEAD', t.state}
  elseif redrive then
    why = mismatch(t)
    if why then
      replies[#replies + 1] = {'NOMATCH', why}
    end
  end
  if t and t.state == 'dead' and not why then
    redis.call('ZREM', KEYS[4], id)
    if redrive then
      record_redrive(id, t)
    end
    if reset then
      t.att = 0
    end
    t.error = nil
    t.fk = nil
    t.finished = nil
    t.first = nil
    t.cancel = nil
    t.run_at = now
    if t.ck then
      if K == nil then
        K = key_hooks({
          policy = policy_of(KEYS[6]) or {}, ready = KEYS[2], seq = KEYS[3], meta = KEYS[1],
          counts = KEYS[7],
        })
        -- Held tasks alone are nothing to claim (the tasks moved so far are all claimable).
        was_empty = was_empty or ready_count(K) == moved
      end
      key_admit(K, id, t)
    else
      make_ready(KEYS[2], KEYS[3], id, t)
    end
    save_task(KEYS[1], id, t)
    moved = moved + 1
    replies[#replies + 1] = {'OK'}
  end
end
if was_empty and moved > 0 then
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return replies

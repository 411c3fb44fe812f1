-- Endpoint health, shared by the scripts that read or feed it (claim, accept, finish); loaded
-- after the prelude. One small JSON value per endpoint in the queue's `health` hash (field =
-- endpoint id), absent fields meaning zero or unknown:
--   fails       observed failures in a row: the circuit breaker's count
--   open_until  while the circuit is open: ms when a probe may go
--   opens       times it opened in a row (each failed probe doubles the pause)
--   probe       the half-open probe is out
--   lat         answer time in ms, push to answer: a peak-sensitive average (a slower answer is
--               taken whole, a faster one moves it by HEALTH_ALPHA; a failure only raises it,
--               so an endpoint failing fast does not look fast)
--   err         share of recent attempts that failed, 0..1 (an average of 0s and 1s)
--   at          ms of the last sample; lat and err fade toward 0 with time since, so an endpoint
--               avoided for its past is tried again (HEALTH_FADE_MS)
-- Only what the gateway observed from the endpoint is a sample (see finish.lua).

local HEALTH_ALPHA = 0.25
local HEALTH_FADE_MS = 30000
local ERROR_WEIGHT = 50

-- The health value of an endpoint, read once per script call into ``cache``.
local function health_of(cache, key, ep_id)
  local h = cache[ep_id]
  if h == nil then
    local raw = redis.call('HGET', key, ep_id)
    h = raw and cjson.decode(raw) or {}
    cache[ep_id] = h
  end
  return h
end

-- Write back every value of ``cache`` that changed.
local function health_save(cache, key)
  for ep_id, h in pairs(cache) do
    if h.dirty then
      h.dirty = nil
      redis.call('HSET', key, ep_id, cjson.encode(h))
    end
  end
end

-- lat (nil when unknown) and err as of ``now``.
local function health_faded(h, now)
  local w = math.exp(-math.max(0, now - (h.at or now)) / HEALTH_FADE_MS)
  return h.lat and h.lat * w, (h.err or 0) * w
end

local function round(x, unit)
  return math.floor(x / unit + 0.5) * unit
end

-- Add one observation: ``latency`` ms (or nil), and whether the attempt failed (or nil).
local function health_sample(h, now, latency, failed)
  local lat, err = health_faded(h, now)
  if latency then
    if not lat or latency > lat then
      lat = latency
    elseif not failed then
      lat = lat + HEALTH_ALPHA * (latency - lat)
    end
  end
  if failed ~= nil then
    err = err + HEALTH_ALPHA * ((failed and 1 or 0) - err)
  end
  h.lat = lat and round(lat, 0.1)
  h.err = err > 0.0001 and round(err, 0.0001) or nil
  h.at = now
  h.dirty = true
end

-- Feed the circuit breaker one observed end: ``healthy`` closes it; a failure counts, and opens
-- it at ``breaker.failures`` in a row, or again at once when it was the half-open probe.
-- Returns the circuit's change, for metrics: 'open' (opened, or reopened by a failed probe),
-- 'closed' (an open or half-open circuit closed), or nil.
local function health_breaker(h, breaker, now, healthy)
  if healthy then
    local change = nil
    if h.open_until then
      change = 'closed'
    end
    if h.fails or h.open_until then
      h.fails, h.open_until, h.opens, h.probe = nil, nil, nil, nil
      h.dirty = true
    end
    return change
  end
  local change = nil
  h.fails = (h.fails or 0) + 1
  if h.probe or (not h.open_until and h.fails >= breaker.failures) then
    local pause = ms(breaker.open_for) * math.pow(2, h.opens or 0)
    h.open_until = now + math.min(pause, ms(breaker.max_open_for))
    h.opens = (h.opens or 0) + 1
    h.probe = nil
    change = 'open'
  end
  h.dirty = true
  return change
end

-- What one more push costs on an endpoint, by which the claim picks the cheapest: its pushes in
-- flight and this one, times its answer time (``unknown`` ms when it has none, plus 1), times
-- 1 + ERROR_WEIGHT x its error share. Equal health gives "least in flight"; an endpoint whose
-- pushes time out or fail gets work only when the others are far busier.
local function health_weight(h, now, unknown)
  local lat, err = health_faded(h, now)
  return ((lat or unknown) + 1) * (1 + ERROR_WEIGHT * err)
end

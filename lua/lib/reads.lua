-- reads.lua: chain reads: the records of a chain's ranges (inline when few, else left to
-- the caller's LRANGEs), a chain read's reply and the position a caller's cache holds.
-- Relies on: base, runs.

-- Records of the ranges (newest first, flat {first, last, ...}), when they are at most `inline`
-- records: every record that passes through Lua costs about half a microsecond of Redis time,
-- while the caller's own LRANGE of a long chain costs a tenth of that. So a short read comes back
-- whole, and a long one comes back as ranges for the caller to read with plain LRANGEs (records
-- never change: reading them after the script is as consistent as reading them in it).
-- Returns {covered ranges} and {LRANGE replies} (root first, matching) and {ranges left}
-- (root first, flat).
local function read_ranges(log_key, ranges, inline)
  local total = 0
  for i = 1, #ranges, 2 do
    total = total + ranges[i + 1] - ranges[i] + 1
  end
  local parts, covered, left = {}, {}, {}
  for i = #ranges - 1, 1, -2 do
    local first, last = ranges[i], ranges[i + 1]
    if total <= inline then
      local records = redis.call('LRANGE', log_key, first, last)
      if #records ~= last - first + 1 then
        fail('CORRUPT', {key = log_key, field = tostring(last), reason = 'a position past the log'})
      end
      parts[#parts + 1] = records
      covered[#covered + 1] = first
      covered[#covered + 1] = last
    else
      left[#left + 1] = first
      left[#left + 1] = last
    end
  end
  return covered, parts, left
end

-- A chain read: {head position, chain length, base, {covered ranges}, {LRANGE replies},
-- {ranges left}, next}; with `limit`, only the newest `limit` messages (a window: no cache
-- base). `base` is `known` when the chain passes through it (the caller holds the chain up to
-- there, read from the same incarnation) and only what follows is read; else -1.
-- `next` >= 0 when the walk must go on from that position (get_chain.lua in "walk" mode); the
-- records are then all left to the caller.
local function chain_reply(runs_key, log_key, head, depth, max_depth, known, inline, limit)
  local length = limit or depth
  if length > max_depth then
    fail('LIMIT', {what = 'chain depth', limit = max_depth, length = length})
  end
  if known > head or limit then
    known = -1
  end
  local ranges, met, next_pos = walk_ranges(runs_key, head, known, limit)
  local base = -1
  if met then
    base = known
  end
  if next_pos >= 0 then
    inline = 0
  end
  local covered, parts, left = read_ranges(log_key, ranges, inline)
  return {head, depth, base, covered, parts, left, next_pos}
end

-- What a cached chain of this chat must have been read from: its incarnation, followed by
-- "~<rgen>" once a message was redacted (redact_message.lua moves the chat's `rgen`), so a
-- copy another process cached before a redaction is never served again.
local function cache_id(inc, rgen)
  if not rgen or rgen == '0' then
    return inc
  end
  return inc .. '~' .. rgen
end

-- The position the caller's cache holds a chain up to, when it was read from this chat as it
-- is (`cached`: cache_id's) and the record there still has the tag the cache saw (a record
-- lost by Redis and its position reused never matches).
local function known_position(log_key, known, known_inc, known_tag, cached)
  local pos = tonumber(known) or -1
  if known_inc ~= cached or pos < 0 or tag_at(log_key, pos) ~= known_tag then
    return -1
  end
  return pos
end

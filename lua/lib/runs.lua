-- runs.lua: positions, runs and ids. A message's position is its index in the log; a run is
-- a stretch of consecutive positions, each the child of the one before (the runs key). Holds
-- generated ids and their tags, the position a message id names, and the walks along a chain
-- by runs.
-- Relies on: base, checks, msgpack.

-- A generated id: position, incarnation and the record's tag. The tag makes the id name that
-- one record: if Redis loses acknowledged writes (a crash without an fsynced AOF, a failover to
-- a lagging replica), the positions are handed out again, but never with the same ids.
local function derived_id(pos, inc, tag)
  return pos .. '.' .. inc .. '.' .. tag
end

-- The tag of the record at pos and the record (nil past the log). A record that does not end
-- with a tag is not a message record.
local function tag_at(log_key, pos)
  local record = redis.call('LINDEX', log_key, pos)
  if not record then
    return nil
  end
  local tag = string.sub(record, -TAG_LENGTH)
  if #record <= TAG_LENGTH + 1 or string.byte(record, -TAG_LENGTH - 1) ~= 160 + TAG_LENGTH
      or not string.find(tag, '^[a-z2-7]+$') then
    corrupt(log_key, tostring(pos), 'position ' .. pos .. ' holds no message record')
  end
  return tag, record
end

-- Whether a record keeps the chosen id `id` (it comes right before the tag).
local function holds_chosen(record, id)
  local tail = pack_str(id) .. string.sub(record, -TAG_LENGTH - 1)
  return string.sub(record, -#tail) == tail
end

-- The position of message `id`: a generated id of this incarnation whose tag matches the
-- record there, or a chosen id in `alias`; nil when the chat holds no such message.
-- `reserved` is true for any id of the generated form of this incarnation (which a caller may
-- not choose for a new message).
local function position_of(alias_key, log_key, inc, id)
  local digits, id_inc, tag = string.match(id, '^(%d+)%.([a-z2-7]+)%.([a-z2-7]+)$')
  if digits and id_inc == inc then
    local pos = tonumber(digits)
    if tostring(pos) == digits and tag_at(log_key, pos) == tag then
      return pos, true
    end
    return nil, true
  end
  local raw = redis.call('HGET', alias_key, id)
  if raw then
    local pos = number_field(alias_key, id, raw)
    local _, record = tag_at(log_key, pos)
    if not record then
      corrupt(alias_key, id, 'names position ' .. pos .. ', past the log')
    elseif not holds_chosen(record, id) then
      corrupt(alias_key, id, 'names position ' .. pos .. ', which holds another message')
    end
    return pos, false
  end
  return nil, false
end

local function require_position(alias_key, log_key, inc, id)
  local pos = position_of(alias_key, log_key, inc, id)
  if not pos then
    fail('NOT_FOUND', {what = 'message', id = id})
  end
  return pos
end

-- Fails unless the record at pos is the message `id` names (a branch head or a checkpoint, read
-- from `key` field `field`): a generated id of this incarnation carries that position and the
-- record's tag, a chosen id is kept in the record. Position -1 (no message) goes with id "".
local function check_message_at(log_key, inc, key, field, pos, id)
  if pos < 0 and id == '' then
    return
  end
  local holds = false
  if pos >= 0 then
    local tag, record = tag_at(log_key, pos)
    -- (no record keeps a chosen id of the generated form: append.lua refuses them)
    holds = record and (id == derived_id(pos, inc, tag) or holds_chosen(record, id))
  end
  if not holds then
    corrupt(key, field, 'names message ' .. id .. ' at position ' .. pos ..
                        ', which holds another message or none')
  end
end

-- A run record, checked: its start is its score (so a walk always moves to an older
-- position and ends), its parent is older than its start, its depth at least 1.
local function parse_run(runs_key, member, score)
  local start, parent, depth = string.match(member, '^(%d+):(%-?%d+):(%d+)$')
  if not start then
    fail('CORRUPT', {key = runs_key, field = member, reason = 'not a run record'})
  end
  start, parent, depth = tonumber(start), tonumber(parent), tonumber(depth)
  if tonumber(score) ~= start then
    fail('CORRUPT', {key = runs_key, field = member, reason = 'a run whose start is not its score'})
  end
  if parent >= start or depth < 1 then
    fail('CORRUPT', {key = runs_key, field = member, reason = 'a run whose parent is not older'})
  end
  return start, parent, depth
end

-- The run holding position p: its first position, the parent of that one, and its depth.
local function run_of(runs_key, p)
  local found = redis.call('ZREVRANGEBYSCORE', runs_key, p, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if not found[1] then
    fail('CORRUPT', {key = runs_key, field = tostring(p), reason = 'a position in no run'})
  end
  return parse_run(runs_key, found[1], found[2])
end

-- Chain length of the message at p (a root has depth 1); 0 for -1.
local function depth_at(runs_key, p)
  if p < 0 then
    return 0
  end
  local start, _, depth = run_of(runs_key, p)
  return depth + p - start
end

local function parent_at(runs_key, p)
  local start, parent = run_of(runs_key, p)
  if p > start then
    return p - 1
  end
  return parent
end

-- Runs one call may walk: each is one ZREVRANGEBYSCORE, so a chain of many short runs (two
-- branches written in turns) is walked over several calls instead of holding Redis.
local MAX_RUNS_PER_CALL = 1000

-- The ranges of the chain ending at head (newest first, as flat {first, last, ...}), stopping
-- after the range that reaches `stop` (exclusive) when `stop` is on the chain. Returns the
-- ranges, whether `stop` was met (always true for stop = -1), and the position to walk on from
-- when the call's run budget ended first (-1 when the walk is complete). `limit` (nil: none)
-- ends the walk after that many messages: a window's newest ones. Each hop moves to an older
-- position, so the walk ends.
local function walk_ranges(runs_key, head, stop, limit)
  local ranges = {}
  local p = head
  local hops = 0
  local left = limit or math.huge  -- messages the caller still wants (a window's newest k)
  while p >= 0 do
    hops = hops + 1
    if hops > MAX_RUNS_PER_CALL then
      return ranges, false, p
    end
    local start, parent = run_of(runs_key, p)
    local stops_here = stop >= start and stop <= p
    if stops_here then
      start = stop + 1
    end
    if p - start + 1 >= left then
      if left > 0 then
        ranges[#ranges + 1] = p - left + 1
        ranges[#ranges + 1] = p
      end
      return ranges, stop < 0 or (stops_here and p - left + 1 <= start), -1
    end
    if start <= p then
      ranges[#ranges + 1] = start
      ranges[#ranges + 1] = p
      left = left - (p - start + 1)
    end
    if stops_here then
      return ranges, true, -1
    end
    p = parent
  end
  return ranges, stop < 0, -1
end

-- The position `steps` messages before p on its chain (by runs: one lookup per run crossed).
local function position_back(runs_key, p, steps)
  while steps > 0 do
    local start = run_of(runs_key, p)
    if p - start >= steps then
      return p - steps
    end
    steps = steps - (p - start + 1)
    p = parent_at(runs_key, start)
  end
  return p
end

-- Every run's start, and the starts of the runs whose parent is each position: {start ->
-- true} and {parent -> {start, ...}}, from one ZRANGE of the runs (one entry per run).
local function run_starts(runs_key)
  local starts, children = {}, {}
  local flat = redis.call('ZRANGE', runs_key, 0, -1, 'WITHSCORES')
  for i = 1, #flat, 2 do
    local start, parent = parse_run(runs_key, flat[i], flat[i + 1])
    starts[start] = true
    children[parent] = children[parent] or {}
    table.insert(children[parent], start)
  end
  return starts, children
end

-- The children of position p (-1: the roots), oldest first: the runs that start with parent
-- p and, when p+1 starts no run, p+1 (written right after it). `length`: the log's.
local function children_of(starts, children, p, length)
  local list = {}
  for _, start in ipairs(children[p] or {}) do
    list[#list + 1] = start
  end
  if p >= 0 and p + 1 < length and not starts[p + 1] then
    list[#list + 1] = p + 1
  end
  table.sort(list)
  return list
end

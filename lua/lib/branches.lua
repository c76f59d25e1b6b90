-- branches.lua: branch and checkpoint records (parsed, checked, written), the active branch,
-- the branch counters and the auto-naming of forks.
-- Relies on: base, checks.

-- Position -1 (an empty branch) goes with id "" and length 0, any other with a length (and an
-- id: append.lua reads back a fork it created without one before it sets its head, and reads
-- that follow a head check its id with check_message_at).
local function parse_branch(key, name, raw)
  local pos, id, created, seq, depth =
    string.match(raw, '^(%-?%d+)\t([^\t]*)\t(%d+)\t(%d+)\t(%d+)$')
  if not pos or #pos > 15 or #created > 15 or #seq > 15 or #depth > 15
      or (string.byte(pos) == 45 and pos ~= '-1') then  -- 45: '-'
    corrupt(key, name, 'not a branch record')
  end
  pos, depth = tonumber(pos), tonumber(depth)
  if (pos == -1 and id ~= '') or (pos == -1) ~= (depth == 0) or not is_utf8(id) then
    corrupt(key, name, 'not a branch record')
  end
  return {pos = pos, id = id, created = created, seq = seq, depth = depth}
end

local function format_branch(b)
  return b.pos .. '\t' .. b.id .. '\t' .. b.created .. '\t' .. b.seq .. '\t' .. b.depth
end

-- The decoded branch record and its raw text (which replies pass on as is).
local function read_branch(branch_key, name)
  local raw = redis.call('HGET', branch_key, name)
  if not raw then
    fail('NOT_FOUND', {what = 'branch', id = name})
  end
  return parse_branch(branch_key, name, raw), raw
end

-- The active branch (its name as the chat hash holds it), decoded and raw: a chat's
-- active_branch always names one of its branches.
local function read_active_branch(chat_key, branch_key, active)
  text_field(chat_key, 'active_branch', active)
  local raw = redis.call('HGET', branch_key, active)
  if not raw then
    corrupt(chat_key, 'active_branch', 'names no branch of the chat')
  end
  return parse_branch(branch_key, active, raw), raw
end

-- A branch name is at most this many bytes, as every name the API takes (ids.check_name).
local MAX_NAME_BYTES = 256

-- Branch auto-naming: <base>-v<k+1>, k = the branches named <base> or starting with <base>-v.
-- Returns a function that reserves names, so several forks in one script never collide; a name
-- already taken (a branch created by hand) moves the counter on. A name that would pass
-- MAX_NAME_BYTES (forks of forks nest: main-v2-v2-...) drops the base's own trailing -v<n>
-- parts, one at a time, keeping as much of its lineage as fits; a base with none left to drop
-- is an INVALID error (the caller names the branch itself). Callers name before any write.
local function branch_namer(branch_key)
  local taken = {}
  for _, name in ipairs(redis.call('HKEYS', branch_key)) do
    taken[name] = true
  end
  local function candidate(base)
    local prefix = base .. '-v'
    local count = 0
    for name in pairs(taken) do
      if name == base or string.sub(name, 1, #prefix) == prefix then
        count = count + 1
      end
    end
    local k = math.max(count, 1) + 1
    while taken[prefix .. k] do
      k = k + 1
    end
    return prefix .. k
  end
  return function(base)
    local name = candidate(base)
    while #name > MAX_NAME_BYTES do
      local shorter = string.match(base, '^(.+)%-v%d+$')
      if not shorter then
        fail('INVALID', {reason = 'a fork of branch ' .. base .. ' would be named with more '
          .. 'than 256 bytes: give the new branch a name', limit = MAX_NAME_BYTES})
      end
      base = shorter
      name = candidate(base)
    end
    taken[name] = true
    return name
  end
end

-- Fails unless the counters create_branch adds to are counts (HINCRBY would fail after a write).
local function check_branch_counters(chat_key)
  local seq, count = unpack(redis.call('HMGET', chat_key, 'branch_seq', 'branch_count'))
  number_field(chat_key, 'branch_seq', seq, 0)
  number_field(chat_key, 'branch_count', count, 0)
end

-- Writes a new branch record; the caller has checked the name is free and the counters (see
-- check_branch_counters). Returns the raw record.
local function create_branch(chat_key, branch_key, name, pos, id, depth, now)
  local seq = redis.call('HINCRBY', chat_key, 'branch_seq', 1)
  redis.call('HINCRBY', chat_key, 'branch_count', 1)
  local raw = format_branch({pos = pos, id = id, created = now, seq = seq, depth = depth})
  redis.call('HSET', branch_key, name, raw)
  return raw
end

local function parse_checkpoint(key, name, raw)
  local pos, id, created, seq = string.match(raw, '^(%d+)\t([^\t]+)\t(%d+)\t(%d+)$')
  if not pos or #pos > 15 or #created > 15 or #seq > 15 or not is_utf8(id) then
    corrupt(key, name, 'not a checkpoint record')
  end
  return {pos = tonumber(pos), id = id, created = created, seq = seq}
end

-- _prelude.lua: helpers shared by every entry script. Not an entry script itself: the loader
-- (ctxstore.core.scripts) puts this text in front of each entry script, so every operation stays a
-- single EVALSHA while no helper is copied between files.
--
-- Conventions
--   * Domain errors are error replies "CTX_<CODE> <json details>" (CODE: NOT_FOUND, CONFLICT,
--     FORBIDDEN, CORRUPT, LIMIT, INVALID), mapped to exceptions in ctxstore.core.failures.
--     fail() raises them; run() turns the raise into the reply. Scripts validate everything before
--     their first write, because a Lua error after a write does not roll the write back.
--   * Branch and checkpoint records are small cjson objects. Message records are msgpack bytes that
--     Lua never decodes.
--   * "" stands for "no message" (the parent of a root, the head of an empty branch).
--   * Every loop is bounded by the size of a hash it has already read or by an ARGV limit.

local function fail(code, details)
  error({ctx = 'CTX_' .. code .. ' ' .. cjson.encode(details)})
end

local function run(main)
  local ok, result = pcall(main)
  if ok then
    return result
  end
  if type(result) == 'table' and result.ctx then
    return redis.error_reply(result.ctx)
  end
  error(result, 0)
end

-- The chat's owner; fails when the chat does not exist.
local function require_chat(chat_key)
  local owner = redis.call('HGET', chat_key, 'user_id')
  if not owner then
    fail('NOT_FOUND', {what = 'chat'})
  end
  return owner
end

local function decode_record(key, field, raw)
  local ok, record = pcall(cjson.decode, raw)
  if not ok or type(record) ~= 'table' then
    fail('CORRUPT', {key = key, field = field, reason = 'not a JSON object'})
  end
  return record
end

-- The decoded branch record and its raw JSON (which replies pass on to the caller as is).
local function read_branch(branch_key, name)
  local raw = redis.call('HGET', branch_key, name)
  if not raw then
    fail('NOT_FOUND', {what = 'branch', id = name})
  end
  local record = decode_record(branch_key, name, raw)
  if type(record.head) ~= 'string' then
    fail('CORRUPT', {key = branch_key, field = name, reason = 'branch record without a head'})
  end
  return record, raw
end

local function write_branch(branch_key, name, record)
  redis.call('HSET', branch_key, name, cjson.encode(record))
end

local function require_message(parent_key, message_id)
  if redis.call('HEXISTS', parent_key, message_id) == 0 then
    fail('NOT_FOUND', {what = 'message', id = message_id})
  end
end

-- Chain length of a message (a root has depth 1); 0 for "".
local function depth_of(depth_key, message_id)
  if message_id == '' then
    return 0
  end
  local depth = redis.call('HGET', depth_key, message_id)
  if not depth then
    fail('CORRUPT', {key = depth_key, field = message_id, reason = 'message without a depth'})
  end
  return tonumber(depth)
end

-- Branch auto-naming: <base>-v<k+1>, k = the branches named <base> or starting with <base>-v.
-- Returns a function that reserves names, so several forks in one script never collide; a name
-- already taken (a branch created by hand) moves the counter on.
local function branch_namer(branch_key)
  local taken = {}
  for _, name in ipairs(redis.call('HKEYS', branch_key)) do
    taken[name] = true
  end
  return function(base)
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
    local name = prefix .. k
    taken[name] = true
    return name
  end
end

-- Writes a new branch record; the caller has checked the name is free.
local function create_branch(chat_key, branch_key, name, head, now)
  local seq = redis.call('HINCRBY', chat_key, 'branch_seq', 1)
  redis.call('HINCRBY', chat_key, 'branch_count', 1)
  write_branch(branch_key, name, {head = head, created_at = now, seq = seq})
end

-- Moves updated_at forward (never back: writers' clocks differ); returns the value it holds.
local function touch(chat_key, now)
  local current = tonumber(redis.call('HGET', chat_key, 'updated_at') or '0')
  if now > current then
    redis.call('HSET', chat_key, 'updated_at', now)
    return now
  end
  return current
end

-- Creates the chat (with an empty, active branch "main") or checks its owner, then merges the
-- metadata pairs ARGV[meta_from..]. Returns 1 when it created the chat.
local function upsert_chat(chat_key, branch_key, user_id, now, meta_from)
  local owner = redis.call('HGET', chat_key, 'user_id')
  if owner and owner ~= user_id then
    fail('FORBIDDEN', {what = 'chat'})
  end
  if not owner and redis.call('EXISTS', chat_key) == 1 then
    fail('CORRUPT', {key = chat_key, field = 'user_id', reason = 'chat without an owner'})
  end
  local created = 0
  if not owner then
    created = 1
    redis.call('HSET', chat_key, 'user_id', user_id, 'created_at', now, 'updated_at', now,
               'active_branch', 'main', 'message_count', 0, 'branch_count', 0, 'branch_seq', 0)
    create_branch(chat_key, branch_key, 'main', '', now)
  end
  if #ARGV >= meta_from then
    redis.call('HSET', chat_key, unpack(ARGV, meta_from))
    touch(chat_key, now)
  end
  return created
end

-- The ids an append stored before, when ARGV[from..] (id, spare id, record triples) is a replay
-- of it: each message stored under its id or its spare id with the very same record bytes (the
-- record holds the call's timestamp, so only the same call matches), each the child of the one
-- before. nil otherwise. Costs nothing unless the first message already exists.
local function replayed_append(msg_key, parent_key, from)
  local first, first_spare = ARGV[from], ARGV[from + 1]
  if redis.call('HEXISTS', parent_key, first) == 0
     and (first_spare == '' or redis.call('HEXISTS', parent_key, first_spare) == 0) then
    return nil
  end
  local stored = {}
  for i = from, #ARGV, 3 do
    local used = nil
    for _, candidate in ipairs({ARGV[i], ARGV[i + 1]}) do
      if not used and candidate ~= '' and redis.call('HGET', msg_key, candidate) == ARGV[i + 2] then
        used = candidate
      end
    end
    if not used then
      return nil
    end
    if #stored > 0 and redis.call('HGET', parent_key, used) ~= stored[#stored] then
      return nil
    end
    stored[#stored + 1] = used
  end
  return stored
end

-- The name of a branch whose head is message_id, preferring `preferred`.
local function branch_with_head(branch_key, message_id, preferred)
  local flat = redis.call('HGETALL', branch_key)
  local found = preferred
  for i = 1, #flat, 2 do
    local ok, record = pcall(cjson.decode, flat[i + 1])
    if ok and type(record) == 'table' and record.head == message_id then
      if flat[i] == preferred then
        return preferred
      end
      found = flat[i]
    end
  end
  return found
end

-- HMGET in slices: unpack() of a very long list overflows the Lua stack.
local function hmget_all(key, fields)
  local values = {}
  local slice = 1000
  for first = 1, #fields, slice do
    local last = math.min(first + slice - 1, #fields)
    local part = redis.call('HMGET', key, unpack(fields, first, last))
    for i = 1, #part do
      values[first + i - 1] = part[i]
    end
  end
  return values
end

-- Walks parent pointers from head to the root and returns the ids root first.
-- Bounded by max_depth and by the number of messages (a longer walk can only be a cycle).
local function walk_chain(parent_key, head, max_depth)
  local ids = {}
  if head == '' then
    return ids
  end
  require_message(parent_key, head)
  local total = redis.call('HLEN', parent_key)
  local bound = math.min(max_depth, total)
  local reversed = {}
  local current = head
  local n = 0
  while current ~= '' do
    n = n + 1
    if n > bound then
      if n > total then
        fail('CORRUPT', {key = parent_key, field = head, reason = 'the parent chain has a cycle'})
      end
      fail('LIMIT', {what = 'chain depth', limit = max_depth, id = head})
    end
    reversed[n] = current
    local parent = redis.call('HGET', parent_key, current)
    if not parent then
      fail('CORRUPT', {key = parent_key, field = reversed[n - 1],
                       reason = 'parent pointer to a missing message'})
    end
    current = parent
  end
  for i = n, 1, -1 do
    ids[#ids + 1] = reversed[i]
  end
  return ids
end

-- The chain ending at head: ids root first and their records, every record present.
local function read_chain(parent_key, msg_key, head, max_depth)
  local ids = walk_chain(parent_key, head, max_depth)
  local records = hmget_all(msg_key, ids)
  for i = 1, #ids do
    if not records[i] then
      fail('CORRUPT', {key = msg_key, field = ids[i], reason = 'message without a record'})
    end
  end
  return ids, records
end

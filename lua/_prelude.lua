-- _prelude.lua: helpers shared by every entry script. Not an entry script itself: the loader
-- (ctxstore.core.scripts) puts this text in front of each entry script, so every operation stays a
-- single EVALSHA while no helper is copied between files.
--
-- Storage layout (format 2; see ctxstore.core.keys for the whole keyspace)
--   chat    HASH  owner, fmt, inc (incarnation), times, active branch, counters, metadata, usage
--   log     LIST  message records in write order; a message's position is its index here
--   alias   HASH  caller-chosen message id -> position (generated ids need no entry)
--   runs    ZSET  score = first position of a run, member "<start>:<parent of start>:<depth of
--                 start>". A run is a stretch of consecutive positions, each the child of the one
--                 before, so a chain is read as a few LRANGEs instead of one hop per message.
--   branch  HASH  name -> "<head position>\t<head id>\t<created_at>\t<seq>\t<chain length>"
--   checkpoint HASH name -> "<position>\t<message id>\t<created_at>\t<seq>"
--   req / req_old  HASH  request id -> reply summary of recent writes (resend detection), two
--                 generations rotated every minute and expiring on their own
--   summary ZSET  score = the position of the last message a summary covers, member = the
--                 summary's tokens (5 bytes, big-endian) then its msgpack record. A summary
--                 applies to every chain through that message; one per position, never changed.
--   tok     STRING TOK_WIDTH bytes per log position: a flags byte (1: the message continues
--                 the tool group before it, a tool result or a Responses API call or output
--                 item: no window starts with it) and the tokens of the chain from its root through that message
--                 (big-endian, 40 bits). A chain's size is one read at its head; a window of
--                 the newest N tokens is a binary search, with no payload read.
-- A generated message id is "<position>.<incarnation>.<tag>": unique, meaningless in any other
-- incarnation of the chat (a chat deleted and re-created gets a new one), and never reused.
-- A record is a msgpack array [parent position, created_at, payload, chosen id or nil, tag]
-- (with per-message metadata: [parent, created_at, payload, metadata, chosen id or nil, tag]):
-- the parent is -1 for a root and -2 for "the position before mine" (so a client can build the
-- record before knowing where it lands); the tag is 6 random characters. The client builds
-- records; Lua rewrites the parent of the few that need it and treats the rest as opaque bytes
-- (not every Lua has a msgpack library).
--
-- Conventions
--   * Domain errors are error replies "CTX_<CODE> <json details>" (CODE: NOT_FOUND, CONFLICT,
--     FORBIDDEN, CORRUPT, LIMIT, INVALID, REPLACED), mapped to exceptions in
--     ctxstore.core.failures. fail() raises them; run() turns the raise into the reply. Scripts
--     validate everything before their first write: a Lua error after a write does not roll back.
--   * Position -1 and id "" stand for "no message" (the parent of a root, an empty branch head).
--   * Every chat script's `inc` argument is the incarnation the caller knows ("" for any),
--     optionally followed by "#<fence>": a write made inside a turn carries the turn's fencing
--     token, and is refused (CONFLICT lease_lost) unless that token is still the chat's newest
--     (see turn_lease.lua).
--   * Every loop is bounded by the size of something already read or by an ARGV limit.

local FORMAT = '2'
-- Every record ends with a 6-character random tag (msgpack fixstr: 7 bytes).
local TAG_LENGTH = 6
local REQUEST_GENERATION_MS = 60000

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

-- Refuses a write of a turn whose fencing token is no longer the chat's newest: another turn
-- took the chat since (the `turn` field is "<fence>\t<holder token>\t<expires>"). A lease that
-- expired but that nobody took since still writes: its token is still the newest.
local function check_fence(chat_key, fence)
  if fence == '' then
    return
  end
  local current = string.match(redis.call('HGET', chat_key, 'turn') or '', '^(%d+)\t')
  if current ~= fence then
    fail('CONFLICT', {reason = 'lease_lost', fence = fence, current = current or ''})
  end
end

-- Checked values -----------------------------------------------------------------------------
-- Everything a script reads from Redis is checked before the script relies on it (and before
-- its first write): a malformed value is a CORRUPT error naming its key and field, never a Lua
-- error after a write or a silent default. The checks accept exactly what ctxstore's Python
-- reader accepts, so a value a script passes on never fails to parse after the script wrote.

local MAX_EXACT = 9007199254740992  -- 2^53: Lua numbers are exact up to here
local MAX_ID_BYTES = 256

local function corrupt(key, field, reason)
  fail('CORRUPT', {key = key, field = field, reason = reason})
end

-- Whether s is UTF-8 as Python's strict decoder reads it: no overlong forms, no surrogates,
-- nothing past U+10FFFF. One pass over the bytes, none at all for ASCII.
local function is_utf8(s)
  if not string.find(s, '[\128-\255]') then
    return true
  end
  local i, n = 1, #s
  while i <= n do
    local c = string.byte(s, i)
    if c < 128 then
      i = i + 1
    else
      local width, low, high  -- the sequence's length and the range of its second byte
      if c >= 194 and c <= 223 then
        width, low, high = 2, 128, 191
      elseif c == 224 then
        width, low, high = 3, 160, 191
      elseif c == 237 then
        width, low, high = 3, 128, 159
      elseif c >= 225 and c <= 239 then
        width, low, high = 3, 128, 191
      elseif c == 240 then
        width, low, high = 4, 144, 191
      elseif c >= 241 and c <= 243 then
        width, low, high = 4, 128, 191
      elseif c == 244 then
        width, low, high = 4, 128, 143
      else
        return false
      end
      if i + width - 1 > n then
        return false
      end
      local b = string.byte(s, i + 1)
      if b < low or b > high then
        return false
      end
      for j = i + 2, i + width - 1 do
        b = string.byte(s, j)
        if b < 128 or b > 191 then
          return false
        end
      end
      i = i + width
    end
  end
  return true
end

-- Whether s is an id ctxstore accepts for a chat or user: 1 to 256 bytes of UTF-8 without
-- control characters (C0, DEL, C1) or braces.
local function is_key_id(s)
  if #s == 0 or #s > MAX_ID_BYTES then
    return false
  end
  if not string.find(s, '[%z\1-\31\127-\255{}]') then
    return true  -- plain ASCII, the usual case: one pass
  end
  return not string.find(s, '[%z\1-\31\127{}]') and not string.find(s, '\194[\128-\159]')
    and is_utf8(s)
end

-- What is wrong with a chat's identity (the field and why), or nil: the format must be this
-- one, the incarnation one ctxstore generated and the owner an id it accepts. An incarnation or
-- owner equal to the one the caller sent was checked by the client already.
local function identity_problem(owner, fmt, inc, user, expected_inc)
  if fmt ~= FORMAT then
    return 'fmt', 'not written by this version of ctxstore (format ' .. FORMAT .. ')'
  end
  if not inc or ((expected_inc == '' or inc ~= expected_inc)
                 and not string.find(inc, '^[a-z2-7]+$')) then
    return 'inc', 'not an incarnation'
  end
  if (user == '' or owner ~= user) and not is_key_id(owner) then
    return 'user_id', 'not a user id'
  end
  return nil
end

-- A count, position or time as ctxstore writes it (and HINCRBY and Python's int() read it):
-- decimal digits without a leading zero, at most 2^53. `default` (nil: the field is required)
-- stands in for an absent field.
local function number_field(key, field, raw, default)
  if not raw then  -- nil, or false: what redis.call gives for an absent field
    if default ~= nil then
      return default
    end
    corrupt(key, field, 'missing')
  end
  if #raw > 16 or not (raw == '0' or string.find(raw, '^[1-9]%d*$'))
      or tonumber(raw) > MAX_EXACT then
    corrupt(key, field, 'not a non-negative integer')
  end
  return tonumber(raw)
end


-- A text field: present and UTF-8.
local function text_field(key, field, raw)
  if not raw then
    corrupt(key, field, 'missing')
  elseif not is_utf8(raw) then
    corrupt(key, field, 'not UTF-8 text')
  end
  return raw
end

-- The chat's fields named in `names` (after owner, format and incarnation), once its identity is
-- checked: it exists, has this layout, is the incarnation the caller knew (expected_inc, "" for
-- any, optionally followed by "#<fence>") and belongs to the caller (user, "" for anyone), and a
-- turn's fencing token is still the newest. Returns owner, incarnation, the rest. With
-- `fence_later`, the token is not checked but returned fourth: a script that recognizes a resent
-- call checks it after that (the first call may have been fenced in time, its resend not).
local function open_chat(chat_key, user, expected_inc, names, fence_later)
  local fence = ''
  local mark = string.find(expected_inc, '#', 1, true)
  if mark then
    fence = string.sub(expected_inc, mark + 1)
    expected_inc = string.sub(expected_inc, 1, mark - 1)
  end
  local fields = redis.call('HMGET', chat_key, 'user_id', 'fmt', 'inc', unpack(names or {}))
  local owner, fmt, inc = fields[1], fields[2], fields[3]
  if not owner then
    if redis.call('EXISTS', chat_key) == 1 then
      fail('CORRUPT', {key = chat_key, field = 'user_id', reason = 'chat without an owner'})
    end
    if expected_inc ~= '' then
      fail('REPLACED', {what = 'chat', reason = 'deleted'})
    end
    fail('NOT_FOUND', {what = 'chat'})
  end
  local broken, reason = identity_problem(owner, fmt, inc, user, expected_inc)
  if broken then
    fail('CORRUPT', {key = chat_key, field = broken, reason = reason})
  end
  if expected_inc ~= '' and inc ~= expected_inc then
    fail('REPLACED', {what = 'chat', reason = 're-created'})
  end
  if user ~= '' and owner ~= user then
    fail('FORBIDDEN', {what = 'chat'})
  end
  if fence_later then
    return owner, inc, {unpack(fields, 4)}, fence
  end
  check_fence(chat_key, fence)
  return owner, inc, {unpack(fields, 4)}
end

-- Branch records ----------------------------------------------------------------------------

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

-- msgpack, the little Lua writes ----------------------------------------------------------------

local function byte_string(n, width)
  local out = {}
  for i = width, 1, -1 do
    out[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(out)
end

-- A msgpack integer >= -1 (positions and counts).
local function pack_int(n)
  if n == -1 then
    return '\255'
  elseif n < 128 then
    return string.char(n)
  elseif n < 256 then
    return '\204' .. string.char(n)
  elseif n < 65536 then
    return '\205' .. byte_string(n, 2)
  end
  return '\206' .. byte_string(n, 4)
end

local function pack_str(s)
  local n = #s
  if n < 32 then
    return string.char(160 + n) .. s
  elseif n < 256 then
    return '\217' .. string.char(n) .. s
  end
  return '\218' .. byte_string(n, 2) .. s
end

-- msgpack, what Lua checks ----------------------------------------------------------------------
-- Payloads and metadata stay opaque to Lua; a script that passes stored msgpack on to the
-- client after writing checks it first, with the rules of ctxstore's reader: strings in UTF-8,
-- map keys of scalar types, no extension types (ctxstore never writes them), at most 1,024
-- nested arrays and maps.

local MSGPACK_MAX_DEPTH = 1024
-- Types whose header gives a length (bin, str) or a count (array, map) in 1, 2 or 4 bytes.
local MSGPACK_SIZED = {
  [0xc4] = {'bin', 1}, [0xc5] = {'bin', 2}, [0xc6] = {'bin', 4},
  [0xd9] = {'str', 1}, [0xda] = {'str', 2}, [0xdb] = {'str', 4},
  [0xdc] = {'array', 2}, [0xdd] = {'array', 4}, [0xde] = {'map', 2}, [0xdf] = {'map', 4},
}

-- The value whose header starts at byte i of s: its kind ('int', 'scalar', 'str', 'bin',
-- 'array', 'map'), the byte after its header, and its payload's length in bytes (an array's or
-- a map's item count); nil when no value ctxstore reads starts there.
local function mp_head(s, i)
  local c = string.byte(s, i)
  if not c then
    return nil
  elseif c <= 0x7f or c >= 0xe0 then
    return 'int', i + 1, 0
  elseif c <= 0x8f then
    return 'map', i + 1, c - 0x80
  elseif c <= 0x9f then
    return 'array', i + 1, c - 0x90
  elseif c <= 0xbf then
    return 'str', i + 1, c - 0xa0
  elseif c == 0xc0 or c == 0xc2 or c == 0xc3 then
    return 'scalar', i + 1, 0
  elseif c == 0xca or c == 0xcb then
    return 'scalar', i + 1, c == 0xca and 4 or 8
  elseif c >= 0xcc and c <= 0xd3 then
    return 'int', i + 1, 2 ^ ((c - 0xcc) % 4)
  end
  local sized = MSGPACK_SIZED[c]
  if not sized or i + sized[2] > #s then
    return nil
  end
  local n = 0
  for j = i + 1, i + sized[2] do
    n = n * 256 + string.byte(s, j)
  end
  return sized[1], i + 1 + sized[2], n
end

-- The byte after the one msgpack value starting at byte i of s, or nil when none ctxstore reads
-- starts there. Every value read takes at least one byte, so the walk ends within #s steps.
local function mp_skip(s, i)
  local n = #s
  local left, maps, seen = {1}, {false}, {0}  -- per open array or map: items left, kind, read
  while #left > 0 do
    local d = #left
    if left[d] == 0 then
      left[d], maps[d], seen[d] = nil, nil, nil
    else
      left[d] = left[d] - 1
      local is_key = maps[d] and seen[d] % 2 == 0
      seen[d] = seen[d] + 1
      local kind, from, size = mp_head(s, i)
      if not kind then
        return nil
      end
      if kind == 'array' or kind == 'map' then
        if is_key or d > MSGPACK_MAX_DEPTH then
          return nil
        end
        left[d + 1] = kind == 'map' and 2 * size or size
        maps[d + 1], seen[d + 1] = kind == 'map', 0
        i = from
      else
        i = from + size
        if i > n + 1 or (kind == 'str' and not is_utf8(string.sub(s, from, i - 1))) then
          return nil
        end
      end
    end
  end
  return i
end

-- Positions, runs and ids ---------------------------------------------------------------------

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

-- The run holding position p: its first position, the parent of that one, and its depth.
local function run_of(runs_key, p)
  local member = redis.call('ZREVRANGEBYSCORE', runs_key, p, '-inf', 'LIMIT', 0, 1)[1]
  if not member then
    fail('CORRUPT', {key = runs_key, field = tostring(p), reason = 'a position in no run'})
  end
  local start, parent, depth = string.match(member, '^(%d+):(%-?%d+):(%d+)$')
  if not start then
    fail('CORRUPT', {key = runs_key, field = member, reason = 'not a run record'})
  end
  start, parent, depth = tonumber(start), tonumber(parent), tonumber(depth)
  if parent >= start or depth < 1 then
    fail('CORRUPT', {key = runs_key, field = member, reason = 'a run whose parent is not older'})
  end
  return start, parent, depth
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

-- Summaries -----------------------------------------------------------------------------------

local SUMMARY_TOKEN_BYTES = 5

-- The tokens a summary member (at position pos) records in its first bytes.
local function summary_tokens(summary_key, member, pos)
  if #member <= SUMMARY_TOKEN_BYTES then
    corrupt(summary_key, tostring(pos), 'a summary without a record')
  end
  local a, b, c, d, e = string.byte(member, 1, SUMMARY_TOKEN_BYTES)
  return (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end

-- Whether a summary member holds, after its tokens, a record ctxstore's reader accepts: a map
-- whose message_id and content are strings, created_at an integer and metadata a map.
local function summary_record_ok(member)
  local first = SUMMARY_TOKEN_BYTES + 1
  if #member < first or mp_skip(member, first) ~= #member + 1 then
    return false
  end
  local kind, i, count = mp_head(member, first)
  if kind ~= 'map' then
    return false
  end
  local found = {}
  for _ = 1, count do
    local key_kind, key_from, key_size = mp_head(member, i)
    local value_at = mp_skip(member, i)
    if key_kind == 'str' then
      found[string.sub(member, key_from, key_from + key_size - 1)] = mp_head(member, value_at)
    end
    i = mp_skip(member, value_at)
  end
  return found.message_id == 'str' and found.content == 'str' and found.created_at == 'int'
    and found.metadata == 'map'
end

-- The newest summary on the chain ending at head: its position and member (-1, nil: none).
-- One ZREVRANGEBYSCORE per run walked (none at all for a chat without summaries), at most
-- MAX_RUNS_PER_CALL runs back.
local function newest_summary(runs_key, summary_key, head)
  if head < 0 or redis.call('ZCARD', summary_key) == 0 then
    return -1, nil
  end
  local p, hops = head, 0
  while p >= 0 and hops < MAX_RUNS_PER_CALL do
    hops = hops + 1
    local start, parent = run_of(runs_key, p)
    local found = redis.call('ZREVRANGEBYSCORE', summary_key, p, start, 'WITHSCORES',
                             'LIMIT', 0, 1)
    if found[1] then
      return tonumber(found[2]), found[1]
    end
    p = parent
  end
  return -1, nil
end

-- Token entries -------------------------------------------------------------------------------

local TOK_WIDTH = 6
local TOOL_RESULT = 1
local MAX_CHAIN_TOKENS = 1099511627775  -- 2^40 - 1

-- Flags and chain tokens of the entry at byte `offset` (0-based) of s.
local function tok_decode(s, offset)
  local flags, a, b, c, d, e = string.byte(s, offset + 1, offset + TOK_WIDTH)
  return flags, (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end

local function tok_encode(flags, total)
  local out = {}
  for i = TOK_WIDTH, 2, -1 do
    local byte = total % 256
    out[i] = string.char(byte)
    total = (total - byte) / 256
  end
  out[1] = string.char(flags)
  return table.concat(out)
end

-- Flags and chain tokens of position p (0, 0 for -1: before a root).
local function tok_at(tok_key, p)
  if p < 0 then
    return 0, 0
  end
  local s = redis.call('GETRANGE', tok_key, p * TOK_WIDTH, p * TOK_WIDTH + TOK_WIDTH - 1)
  if #s ~= TOK_WIDTH then
    fail('CORRUPT', {key = tok_key, field = tostring(p), reason = 'a position without tokens'})
  end
  return tok_decode(s, 0)
end

-- How many of the newest messages of the chain ending at head (depth messages long) a window
-- keeps: the longest suffix within max_tokens tokens (nil: any) and max_messages messages
-- (nil: any) that does not start with a tool result (its call is outside: the group is
-- dropped whole). When that is empty because of max_tokens, the newest message is kept alone
-- with its tool group (a tool result comes with the results before it and their call), unless
-- the group is longer than max_messages. One GETRANGE per run walked and per binary-search
-- probe; no record is read.
local function window_size(runs_key, tok_key, head, depth, max_tokens, max_messages)
  if head < 0 then
    return 0
  end
  local limit = depth
  if max_messages and max_messages < limit then
    limit = max_messages
  end
  local _, head_total = tok_at(tok_key, head)
  local floor = -1  -- the chain tokens a kept suffix may start after
  if max_tokens then
    floor = head_total - max_tokens
  end
  local kept, p, oldest, hops = 0, head, head + 1, 0
  while p >= 0 and kept < limit and hops < MAX_RUNS_PER_CALL do
    hops = hops + 1
    local start, parent = run_of(runs_key, p)
    local lowest = math.max(start, p - (limit - kept) + 1)
    local _, before = tok_at(tok_key, lowest == start and parent or lowest - 1)
    if before < floor then
      -- Binary search: the oldest q in (lowest, p] whose predecessor q-1 holds >= floor tokens.
      local lo, hi = lowest + 1, p + 1
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local _, at = tok_at(tok_key, mid - 1)
        if at >= floor then
          hi = mid
        else
          lo = mid + 1
        end
      end
      lowest = lo
    end
    if lowest <= p then
      kept = kept + p - lowest + 1
      oldest = lowest
    end
    if lowest > start then
      break
    end
    p = parent
  end
  -- The oldest kept messages may be tool results whose call fell outside: drop them.
  while kept > 0 do
    local flags = tok_at(tok_key, oldest)
    if flags % 2 ~= TOOL_RESULT then
      break
    end
    kept = kept - 1
    if kept > 0 then
      oldest = position_back(runs_key, head, kept - 1)
    end
  end
  if kept == 0 and max_tokens and limit > 0 then
    -- Nothing fits: the newest message alone, with the tool group it closes.
    local group, q = 1, head
    while (tok_at(tok_key, q)) % 2 == TOOL_RESULT do
      q = parent_at(runs_key, q)
      if q < 0 then
        break
      end
      group = group + 1
    end
    if group <= limit then
      kept = group
    end
  end
  return kept
end

-- Commands over long lists ------------------------------------------------------------------

-- Runs `command key <items>` in slices: unpack() of a very long list overflows the Lua stack.
local function in_slices(command, key, items)
  local slice = 1000
  for first = 1, #items, slice do
    redis.call(command, key, unpack(items, first, math.min(first + slice - 1, #items)))
  end
end

-- Chat fields ---------------------------------------------------------------------------------

-- The chat hash's fields the reader of a chat parses, besides metadata ("m:<key>", msgpack),
-- usage ("u:<counter>", counts) and the identity open_chat checks: true for counts and times,
-- false for text. All but the title and the retention are always there.
local CHAT_FIELDS = {created_at = true, updated_at = true, active_branch = false, title = false,
                     ttl = true}
local OPTIONAL_CHAT_FIELDS = {title = true, ttl = true}

-- Fails unless every field of the chat hash that the reader of a chat parses is well formed,
-- those in `replaced` (field name -> true) excepted: the caller overwrites them. A script that
-- writes the chat and replies with its whole hash calls it before its first write.
local function check_chat_hash(chat_key, replaced)
  local flat = redis.call('HGETALL', chat_key)
  local present = {}
  for i = 1, #flat, 2 do
    local name, value = flat[i], flat[i + 1]
    present[name] = true
    local prefix = string.sub(name, 1, 2)
    if replaced[name] then
      -- overwritten by the caller
    elseif not is_utf8(name) then
      fail('CORRUPT', {key = chat_key, reason = 'a field name that is not UTF-8'})
    elseif prefix == 'm:' then
      if mp_skip(value, 1) ~= #value + 1 then
        corrupt(chat_key, name, 'not a msgpack value ctxstore reads')
      end
    elseif prefix == 'u:' or CHAT_FIELDS[name] then
      number_field(chat_key, name, value)
    elseif CHAT_FIELDS[name] == false then
      text_field(chat_key, name, value)
    end
  end
  for name in pairs(CHAT_FIELDS) do
    if not OPTIONAL_CHAT_FIELDS[name] and not present[name] and not replaced[name] then
      corrupt(chat_key, name, 'missing')
    end
  end
end

-- The newer of the stored updated_at (read with number_field) and now: writers' clocks
-- differ, and it never moves back.
local function newer(stored, now)
  if now > stored then
    return now
  end
  return stored
end

-- Refuses (LIMIT, before anything is written) a metadata merge that would leave the chat with
-- more than max_keys metadata keys or max_bytes bytes of them (every "m:<key>" field name and
-- value counted): the pairs are args[first..], the chat's own fields are read one by one, never
-- unpacked (a chat written before the bounds may hold thousands).
local function check_metadata_merge(chat_key, args, first, max_keys, max_bytes)
  local sizes, keys, bytes = {}, 0, 0
  local stored = redis.call('HGETALL', chat_key)
  for i = 1, #stored, 2 do
    if string.sub(stored[i], 1, 2) == 'm:' then
      sizes[stored[i]] = #stored[i] + #stored[i + 1]
      keys = keys + 1
      bytes = bytes + sizes[stored[i]]
    end
  end
  for i = first, #args, 2 do
    local before = sizes[args[i]]
    if before then
      bytes = bytes - before
    else
      keys = keys + 1
    end
    sizes[args[i]] = #args[i] + #(args[i + 1] or '')
    bytes = bytes + sizes[args[i]]
  end
  if keys > max_keys then
    fail('LIMIT', {what = 'metadata keys', limit = max_keys, size = keys})
  end
  if bytes > max_bytes then
    fail('LIMIT', {what = 'metadata bytes', limit = max_bytes, size = bytes})
  end
end

-- Resend detection ------------------------------------------------------------------------------

-- The summary a write with this request id left, or nil. Ids live at least a minute.
local function recall_request(req_key, req_old_key, request)
  if request == '' then
    return nil
  end
  return redis.call('HGET', req_key, request) or redis.call('HGET', req_old_key, request)
end

-- When the chat's current request generation began (0: none yet), checked: the scripts that
-- remember requests read it before their first write.
local function request_since(chat_key, raw)
  return number_field(chat_key, 'req_since', raw, 0)
end

-- Remembers a write's summary; a generation older than a minute becomes the old one, and each
-- generation expires three minutes after it began, so an idle chat keeps none. `since` comes
-- from request_since.
local function remember_request(chat_key, req_key, req_old_key, request, summary, since, now)
  if request == '' then
    return
  end
  if now - since > REQUEST_GENERATION_MS then
    if redis.call('EXISTS', req_key) == 1 then
      redis.call('RENAME', req_key, req_old_key)
    else
      redis.call('DEL', req_old_key)
    end
    redis.call('HSET', chat_key, 'req_since', now)
    redis.call('HSET', req_key, request, summary)
    redis.call('PEXPIRE', req_key, 3 * REQUEST_GENERATION_MS)
    return
  end
  redis.call('HSET', req_key, request, summary)
end

-- Chain reads -----------------------------------------------------------------------------------

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
-- {ranges left}, next}; with `limit`, only the newest `limit` messages (a window: no cache base). `base` is `known` when the chain passes through it (the caller holds the
-- chain up to there, read from the same incarnation) and only what follows is read; else -1.
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

-- The position the caller's cache holds a chain up to, when it is of this incarnation and the
-- record there still has the tag the cache saw (a record lost by Redis and its position reused
-- never matches).
local function known_position(log_key, known, known_inc, known_tag, inc)
  local pos = tonumber(known) or -1
  if known_inc ~= inc or pos < 0 or tag_at(log_key, pos) ~= known_tag then
    return -1
  end
  return pos
end

-- Retention -------------------------------------------------------------------------------------

-- The chat's retention in milliseconds from its `ttl` field (nil: it never expires), checked
-- before a script's first write.
local function chat_ttl(chat_key, raw)
  if not raw then
    return nil
  end
  local ms = tonumber(raw)
  if not ms or ms < 1 or ms ~= math.floor(ms) then
    fail('CORRUPT', {key = chat_key, field = 'ttl', reason = 'not a positive whole number'})
  end
  return ms
end

-- A retention given by the caller: milliseconds as a whole positive number, "" for none (nil).
local function ttl_argument(raw)
  if raw == '' then
    return nil
  end
  local ms = tonumber(raw)
  if not ms or ms < 1 or ms ~= math.floor(ms) then
    fail('INVALID', {reason = 'ttl must be a positive number of milliseconds', value = raw})
  end
  return ms
end

-- A write's last step for a chat with a retention: every key of the chat expires `ttl`
-- milliseconds from now, so they share one deadline and the chat vanishes whole (keys this
-- write created included). req and req_old are left out: they expire on their own, sooner.
local function slide_expiry(ttl, keys)
  if not ttl then
    return
  end
  for _, key in ipairs(keys) do
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Answer streams --------------------------------------------------------------------------------
-- While an answer is streamed, its text is mirrored into the chat's `stream` key (a Redis
-- Stream holding the entries of all its answers) so that a reader in another process can follow
-- it and resume it. An answer's stream id is "<id of its first entry>.<tag>"; its entries are
-- {t <tag>} (the first), {s <stream id> d <text>} (a piece of text), then {s <stream id> e
-- <message id>} (the answer was saved) or {s <stream id> f <reason>} (it failed). `stream_state`
-- holds a record per stream: "<incarnation>\t<branch>\t<state>\t<deadline>\t<writes>\t<detail>",
-- state live (deadline: the writer must write again before it), done or failed (deadline: the
-- stream expires then; detail: the message id or the reason). Both keys expire on their own.

-- The parts of a stream id (first entry's milliseconds and sequence, tag), or nil.
local function stream_id_parts(sid)
  local ms, seq, tag = string.match(sid, '^(%d+)%-(%d+)%.([a-z2-7]+)$')
  if not ms or #ms > 15 or #seq > 15 or #tag ~= TAG_LENGTH then
    return nil
  end
  return tonumber(ms), tonumber(seq), tag
end

-- The decoded record of stream `sid`, checked (a CORRUPT error names the key and field).
local function parse_stream_record(key, sid, raw)
  local inc, branch, state, deadline, writes, detail =
    string.match(raw, '^([a-z2-7]+)\t([^\t]+)\t(%l+)\t(%d+)\t(%d+)\t(.*)$')
  local ms, seq, tag = stream_id_parts(sid)
  if not inc or not ms or (state ~= 'live' and state ~= 'done' and state ~= 'failed')
      or #deadline > 15 or #writes > 15 or not is_utf8(branch) or not is_utf8(detail) then
    corrupt(key, sid, 'not an answer stream record')
  end
  return {sid = sid, inc = inc, branch = branch, state = state, deadline = tonumber(deadline),
          writes = tonumber(writes), detail = detail, ms = ms, seq = seq, tag = tag}
end

local function format_stream_record(r)
  return r.inc .. '\t' .. r.branch .. '\t' .. r.state .. '\t' .. r.deadline .. '\t' .. r.writes
    .. '\t' .. r.detail
end

-- Every record of the chat's answer streams, checked, oldest first.
local function stream_records(key)
  local flat = redis.call('HGETALL', key)
  local records = {}
  for i = 1, #flat, 2 do
    records[#records + 1] = parse_stream_record(key, flat[i], flat[i + 1])
  end
  table.sort(records, function(a, b)
    return a.ms < b.ms or (a.ms == b.ms and a.seq < b.seq)
  end)
  return records
end

-- The keys of the answer streams expire with the last deadline of the records `records`
-- (after `now`), or now when there is none.
local function expire_with_records(keys, records, now)
  local last = now
  for _, r in ipairs(records) do
    if r.deadline > last then
      last = r.deadline
    end
  end
  for _, key in ipairs(keys) do
    redis.call('PEXPIRE', key, math.max(last - now, 1))
  end
end

-- Keys that expire on their own live at least `ms` more milliseconds (never less than they had).
local function keep_at_least(keys, ms)
  for _, key in ipairs(keys) do
    local left = redis.call('PTTL', key)
    if left == -1 or (left >= 0 and left < ms) then
      redis.call('PEXPIRE', key, ms)
    end
  end
end

-- Gives the chat the retention `ttl` (nil: none): the `ttl` field, and every key's expiry from
-- now (none at all without one).
local function set_retention(chat_key, ttl, keys)
  if ttl then
    redis.call('HSET', chat_key, 'ttl', ttl)
    slide_expiry(ttl, keys)
    return
  end
  redis.call('HDEL', chat_key, 'ttl')
  for _, key in ipairs(keys) do
    redis.call('PERSIST', key)
  end
end

-- summaries.lua: summary members (their tokens and their checked record) and the newest
-- summary on a chain.
-- Relies on: checks, msgpack, runs.

local SUMMARY_TOKEN_BYTES = 5

-- The tokens a summary member (at position pos) records in its first bytes.
local function summary_tokens(summary_key, member, pos)
  if #member <= SUMMARY_TOKEN_BYTES then
    corrupt(summary_key, tostring(pos), 'a summary without a record')
  end
  local a, b, c, d, e = string.byte(member, 1, SUMMARY_TOKEN_BYTES)
  return (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end

-- The msgpack kinds of the fields of a summary member's record (after its tokens), by name;
-- nil when it holds no single map.
local function summary_fields(member)
  local first = SUMMARY_TOKEN_BYTES + 1
  if #member < first or mp_skip(member, first) ~= #member + 1 then
    return nil
  end
  local kind, i, count = mp_head(member, first)
  if kind ~= 'map' then
    return nil
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
  return found
end

-- Whether a summary member holds, after its tokens, a record ctxstore's reader accepts: a map
-- whose message_id is a string, content a string (or, in a sealed chat, a bin: the content and
-- metadata sealed by the client), created_at an integer and metadata a map.
local function summary_record_ok(member)
  local found = summary_fields(member)
  return found ~= nil and found.message_id == 'str'
    and (found.content == 'str' or found.content == 'bin')
    and found.created_at == 'int' and found.metadata == 'map'
end

-- Whether a summary member's content is sealed (a bin: a sealed chat's summary).
local function summary_sealed(member)
  local found = summary_fields(member)
  return found ~= nil and found.content == 'bin'
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

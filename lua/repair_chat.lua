-- repair_chat.lua: rewrite a chat's derived keys as verify rebuilt them, if nothing moved since.
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records in write order (only its length is read; never written)
-- KEYS[3] alias        chosen message id -> position
-- KEYS[4] runs         run starts (see lib/README.md)
-- KEYS[5] branch       branch name -> branch record
-- KEYS[6] checkpoint   checkpoint name -> checkpoint record
-- KEYS[7] summary      the chat's other keys: a rewritten key gets the chat's expiry back
-- KEYS[8] tok          token entries: only flags are rewritten (a total is never touched)
-- KEYS[9] reqs         the ring of recent writes' reply summaries (only its expiry)
-- ARGV[1] inc          the incarnation verify read
-- ARGV[2] length       the log length verify read
-- ARGV[3] alias_items  how many alias items follow (id, position pairs), -1 to leave alias alone
-- ARGV[4] runs_items   how many runs items follow (score, member pairs), -1 to leave runs alone
-- ARGV[5] branch_items how many branch items follow (name, record read, new record triples)
-- ARGV[6] checkpoint_items  how many checkpoint items follow (the same triples)
-- ARGV[7] flags        token-entry flags to rewrite as the payloads give them:
--                      "<position>:<flag>" pairs separated by spaces ("" for none)
-- ARGV[8..] items    the alias, runs, branch and checkpoint items, in that order
-- Reply: {owner, updated_at as stored ("" when absent; the caller checks it where it uses it)}
-- Errors: REPLACED (the chat was deleted or re-created), CORRUPT (the chat hash itself),
--         CONFLICT (the log grew or a record to rewrite changed since verify read it),
--         INVALID (a flag rewrite outside the log or with an unknown flag).
--
-- The records in `log` are the truth and are never touched; everything written here is derived
-- from them by the caller. Verify reads with plain commands, so a write may land between its
-- read and this repair: the log length and each rewritten record are compared first, and a
-- stale rebuild is refused (verify reads again) instead of erasing a newer write's entries.
-- message_count and branch_count are always set from LLEN and HLEN, read here.
-- One script rather than MULTI/EXEC: redis-py's cluster pipelines do not pass MULTI through.

local FIRST_ITEM_ARG = 8

-- ARGV[first .. first + count - 1] as a list.
local function items(first, count)
  local out = {}
  for i = 1, count do
    out[i] = ARGV[first + i - 1]
  end
  return out
end

-- Name, record read, new record triples: fails unless every record still reads as verify saw it.
local function check_unchanged(key, triples)
  for i = 1, #triples, 3 do
    if redis.call('HGET', key, triples[i]) ~= triples[i + 1] then
      fail('CONFLICT', {reason = 'changed', key = key, field = triples[i]})
    end
  end
end

-- The "<position>:<flag>" pairs of ARGV[7], checked against the log's length.
local function flag_rewrites(length)
  local out = {}
  for position, flag in string.gmatch(ARGV[7], '(%d+):(%d+)') do
    position, flag = tonumber(position), tonumber(flag)
    if position >= length or (flag ~= 0 and flag ~= TOOL_RESULT) then
      fail('INVALID', {reason = 'a token flag to rewrite is outside the log or unknown'})
    end
    out[#out + 1] = {position, flag}
  end
  return out
end

local function rewrite(key, triples)
  for i = 1, #triples, 3 do
    redis.call('HSET', key, triples[i], triples[i + 2])
  end
end

-- Replaces a whole hash or sorted set with `entries`, unless count is -1.
local function replace(command, key, count, entries)
  if count < 0 then
    return
  end
  redis.call('DEL', key)
  if #entries > 0 then
    in_slices(command, key, entries)
  end
end

return run(function()
  local chat, log, alias, runs, branch, checkpoint =
    KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
  local owner, _, fields = open_chat(chat, '', ARGV[1], {'updated_at', 'ttl'})
  local ttl = chat_ttl(chat, fields[2])
  local length = redis.call('LLEN', log)
  if length ~= tonumber(ARGV[2]) then
    fail('CONFLICT', {reason = 'changed', key = log, field = 'length'})
  end
  local counts = {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}
  local sections, next_arg = {}, FIRST_ITEM_ARG
  for i, count in ipairs(counts) do
    sections[i] = items(next_arg, math.max(count, 0))
    next_arg = next_arg + math.max(count, 0)
  end
  check_unchanged(branch, sections[3])
  check_unchanged(checkpoint, sections[4])
  local flags = flag_rewrites(length)
  if #flags > 0 and redis.call('STRLEN', KEYS[8]) ~= length * TOK_WIDTH then
    fail('CONFLICT', {reason = 'changed', key = KEYS[8], field = 'length'})
  end

  replace('HSET', alias, counts[1], sections[1])
  replace('ZADD', runs, counts[2], sections[2])
  rewrite(branch, sections[3])
  rewrite(checkpoint, sections[4])
  for _, rewrite_flag in ipairs(flags) do
    redis.call('SETRANGE', KEYS[8], rewrite_flag[1] * TOK_WIDTH, string.char(rewrite_flag[2]))
  end
  redis.call('HSET', chat, 'message_count', length, 'branch_count', redis.call('HLEN', branch))
  slide_expiry(ttl, {chat, log, alias, runs, branch, checkpoint, KEYS[7], KEYS[8], KEYS[9]})
  return {owner, fields[1] or ''}
end)

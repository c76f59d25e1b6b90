-- import_publish.lua: make an imported chat exist, at once, from its staging keys.
-- KEYS[1] chat               chat hash (must not exist)
-- KEYS[2] log                the chat's keys the staging keys become
-- KEYS[3] alias
-- KEYS[4] runs
-- KEYS[5] tok
-- KEYS[6] branch
-- KEYS[7] checkpoint
-- KEYS[8] summary
-- KEYS[9] reqs               recent writes' reply summaries (none: removed with anything there)
-- KEYS[10] staged_log        what import_stage.lua built, in the order of KEYS[2..8]
-- KEYS[11] staged_alias
-- KEYS[12] staged_runs
-- KEYS[13] staged_tok
-- KEYS[14] staged_branch
-- KEYS[15] staged_checkpoint
-- KEYS[16] staged_summary
-- ARGV[1] user_id       the owner
-- ARGV[2] inc           the chat's incarnation, new for this import
-- ARGV[3] created_at    epoch milliseconds, as exported
-- ARGV[4] updated_at
-- ARGV[5] active        the active branch
-- ARGV[6] titled        "1" when the chat has a title (ARGV[7]), "0" when not
-- ARGV[7] title
-- ARGV[8] ttl           the chat's retention in milliseconds, "" for none
-- ARGV[9] counts        "messages\taliases\truns\tbranches\tcheckpoints\tsummaries" the staging
--                       keys must hold
-- ARGV[10] format       FORMAT, or SEALED_FORMAT for an import by a store with encryption (its
--                       records sealed by the client for this incarnation)
-- ARGV[11..] field, value pairs of metadata ("m:<key>" -> msgpack) and usage ("u:<counter>")
-- Reply: the flat HGETALL of the chat hash
-- Errors: CONFLICT chat_exists (a chat has this id: nothing is written), CONFLICT import_lost
--         (the staging keys do not hold what the import sent: they expired or a chunk is
--         missing), INVALID (malformed arguments, an active branch the import has not).
--
-- Until this script runs no read sees the import: no chat hash, no index entry. It renames the
-- staging keys into place (O(1) each), writes the chat hash, and sets the retention, in one
-- step, so a chat is either absent or whole. A resend after a lost reply finds the chat with
-- this import's incarnation and answers as the first call did.

local KEY_PAIRS = 7

return run(function()
  local chat = KEYS[1]
  local user, inc, created_at, updated_at, active = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
  if redis.call('EXISTS', chat) == 1 then
    if redis.call('HGET', chat, 'inc') == inc then
      return redis.call('HGETALL', chat)
    end
    fail('CONFLICT', {reason = 'chat_exists'})
  end
  local counts = {string.match(ARGV[9], '^(%d+)\t(%d+)\t(%d+)\t(%d+)\t(%d+)\t(%d+)$')}
  if not is_key_id(user) or not string.find(inc, '^[a-z2-7]+$')
      or not string.find(created_at, '^%d+$') or not string.find(updated_at, '^%d+$')
      or not is_utf8(active) or not (ARGV[6] == '0' or ARGV[6] == '1') or not is_utf8(ARGV[7])
      or not string.find(ARGV[8], '^%d*$') or #counts ~= 6 or #ARGV % 2 ~= 0
      or (ARGV[10] ~= FORMAT and ARGV[10] ~= SEALED_FORMAT) then
    fail('INVALID', {reason = 'malformed import arguments'})
  end
  local messages = tonumber(counts[1])
  local found = {
    redis.call('LLEN', KEYS[10]), redis.call('HLEN', KEYS[11]), redis.call('ZCARD', KEYS[12]),
    redis.call('HLEN', KEYS[14]), redis.call('HLEN', KEYS[15]), redis.call('ZCARD', KEYS[16]),
  }
  for i = 1, 6 do
    if found[i] ~= tonumber(counts[i]) then
      fail('CONFLICT', {reason = 'import_lost', expected = ARGV[9], found = table.concat(found, '\t')})
    end
  end
  if redis.call('STRLEN', KEYS[13]) ~= messages * TOK_WIDTH then
    fail('CONFLICT', {reason = 'import_lost', what = 'token entries'})
  end
  if redis.call('HEXISTS', KEYS[14], active) == 0 then
    fail('INVALID', {reason = 'the active branch is not one of the imported branches'})
  end

  for i = 1, KEY_PAIRS do
    local target, staged = KEYS[1 + i], KEYS[9 + i]
    if redis.call('EXISTS', staged) == 1 then
      redis.call('RENAME', staged, target)
    else
      redis.call('DEL', target)
    end
  end
  redis.call('DEL', KEYS[9])
  redis.call('HSET', chat, 'user_id', user, 'fmt', ARGV[10], 'inc', inc, 'created_at', created_at,
             'updated_at', updated_at, 'active_branch', active, 'message_count', messages,
             'branch_count', tonumber(counts[4]), 'branch_seq', tonumber(counts[4]),
             'checkpoint_seq', tonumber(counts[5]))
  if ARGV[6] == '1' then
    redis.call('HSET', chat, 'title', ARGV[7])
  end
  if ARGV[8] ~= '' then
    redis.call('HSET', chat, 'ttl', ARGV[8])
  end
  if #ARGV > 10 then
    local fields = {}
    for i = 11, #ARGV do
      fields[#fields + 1] = ARGV[i]
    end
    in_slices('HSET', chat, fields)
  end
  local retained = {chat, KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]}
  if ARGV[8] ~= '' then
    slide_expiry(tonumber(ARGV[8]), retained)
  else
    for _, key in ipairs(retained) do
      redis.call('PERSIST', key)  -- a renamed key keeps its staging expiry
    end
  end
  return redis.call('HGETALL', chat)
end)

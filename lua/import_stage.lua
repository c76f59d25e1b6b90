-- import_stage.lua: add one bounded chunk of an import to its staging keys.
-- KEYS[1] staged_log         the records so far, in write order
-- KEYS[2] staged_alias       message id -> position
-- KEYS[3] staged_runs        run starts (see lib/README.md)
-- KEYS[4] staged_tok         token entries
-- KEYS[5] staged_branch      branch name -> branch record
-- KEYS[6] staged_checkpoint  checkpoint name -> checkpoint record
-- KEYS[7] staged_summary     summaries by position
-- ARGV[1] first      how many records the staging log holds before this chunk
-- ARGV[2] ttl        milliseconds the staging keys live after this chunk (an import that
--                    stops, its process dead, leaves nothing behind for long)
-- ARGV[3] tokens     TOK_WIDTH bytes per record of this chunk
-- ARGV[4] counts     "records\taliases\truns\tbranches\tcheckpoints\tsummaries" of this chunk
-- ARGV[5..] items    the records, then field, value pairs: alias (id, position), runs (score,
--                    member), branches (name, record), checkpoints (name, record), summaries
--                    (score, member)
-- Reply: the records the staging log holds after this chunk
-- Errors: INVALID (counts that do not match the items, a record without a tag), CONFLICT
--         import_lost (the staging log does not hold `first` records: it expired, or another
--         chunk went missing).
--
-- The staging keys are not a chat: no read looks at them, and import_publish.lua renames them
-- into place at once. A resent chunk (after a lost reply) finds its records there and adds
-- nothing twice: the hashes and sorted sets take the same entries again, the log and the token
-- entries are left as they are.

return run(function()
  local first, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
  local records, aliases, runs, branches, checkpoints, summaries = string.match(ARGV[4],
    '^(%d+)\t(%d+)\t(%d+)\t(%d+)\t(%d+)\t(%d+)$')
  if not first or not ttl or not records then
    fail('INVALID', {reason = 'malformed import chunk arguments'})
  end
  records, aliases, runs = tonumber(records), tonumber(aliases), tonumber(runs)
  branches, checkpoints, summaries = tonumber(branches), tonumber(checkpoints), tonumber(summaries)
  local pairs_from = 5 + records
  if #ARGV ~= pairs_from - 1 + 2 * (aliases + runs + branches + checkpoints + summaries) then
    fail('INVALID', {reason = 'import chunk items do not match their counts'})
  end
  if #ARGV[3] ~= records * TOK_WIDTH then
    fail('INVALID', {reason = 'one token entry per record'})
  end
  for i = 5, pairs_from - 1 do
    local record = ARGV[i]
    if #record <= TAG_LENGTH + 1 or string.byte(record, -TAG_LENGTH - 1) ~= 160 + TAG_LENGTH
        or not string.find(string.sub(record, -TAG_LENGTH), '^[a-z2-7]+$') then
      fail('INVALID', {reason = 'a record without a tag', record = i - 4})
    end
  end
  local length = redis.call('LLEN', KEYS[1])
  local tok_length = redis.call('STRLEN', KEYS[4])
  local resent = records > 0 and length == first + records
  if (length ~= first and not resent) or tok_length ~= length * TOK_WIDTH then
    fail('CONFLICT', {reason = 'import_lost', expected = first, found = length})
  end

  if not resent and records > 0 then
    argv_in_slices(ARGV, 'RPUSH', KEYS[1], 5, pairs_from - 1)
    redis.call('APPEND', KEYS[4], ARGV[3])
  end
  local at = pairs_from
  for _, part in ipairs({{'HSET', KEYS[2], aliases}, {'ZADD', KEYS[3], runs},
                         {'HSET', KEYS[5], branches}, {'HSET', KEYS[6], checkpoints},
                         {'ZADD', KEYS[7], summaries}}) do
    argv_in_slices(ARGV, part[1], part[2], at, at + 2 * part[3] - 1)
    at = at + 2 * part[3]
  end
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIRE', key, ttl)
  end
  return redis.call('LLEN', KEYS[1])
end)

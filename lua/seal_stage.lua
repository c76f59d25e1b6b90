-- seal_stage.lua: add one bounded chunk of a chat's sealed copy to its staging keys (ctxstore
-- migrate --encrypt seals a chat written without encryption; docs/encryption.md).
-- KEYS[1] staged_log      the chat's records, sealed, in log order
-- KEYS[2] staged_summary  its summaries, sealed, by position
-- KEYS[3] staged_stream   its answer streams' entries, the pieces of text sealed
-- ARGV[1] first    how many records the staging log holds before this chunk
-- ARGV[2] ttl      milliseconds the staging keys live after this chunk (a run that stops, its
--                  process dead, leaves nothing behind for long)
-- ARGV[3] counts   "records\tsummaries\tentries" of this chunk
-- ARGV[4..] items  the records; then score, member pairs of summaries; then the stream entries
--                  in id order, each its id, its count of fields n, then n field, value pairs
-- Reply: the records the staging log holds after this chunk
-- Errors: INVALID (counts that do not match the items), CONFLICT seal_lost (the staging log
--         does not hold `first` records: it expired, or a chunk went missing).
--
-- The staging keys are no chat's: no read looks at them, and seal_publish.lua renames them into
-- place at once. A resent chunk (after a lost reply) adds nothing twice: the log is left as it
-- is, the sorted set takes the same members again, entries at or before the staged stream's
-- last one are skipped.

-- Whether stream entry id `a` ("<ms>-<seq>") comes after `b`.
local function entry_after(a, b)
  local a_ms, a_seq = string.match(a, '^(%d+)%-(%d+)$')
  local b_ms, b_seq = string.match(b, '^(%d+)%-(%d+)$')
  if not a_ms or not b_ms then
    fail('INVALID', {reason = 'a stream entry id is "<ms>-<seq>"'})
  end
  a_ms, b_ms = tonumber(a_ms), tonumber(b_ms)
  return a_ms > b_ms or (a_ms == b_ms and tonumber(a_seq) > tonumber(b_seq))
end

return run(function()
  local first, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
  local records, summaries, entries = string.match(ARGV[3], '^(%d+)\t(%d+)\t(%d+)$')
  if not first or not ttl or not records then
    fail('INVALID', {reason = 'malformed seal chunk arguments'})
  end
  records, summaries, entries = tonumber(records), tonumber(summaries), tonumber(entries)
  local length = redis.call('LLEN', KEYS[1])
  local resent = records > 0 and length == first + records
  if length ~= first and not resent then
    fail('CONFLICT', {reason = 'seal_lost', expected = first, found = length})
  end
  local at = 4
  if records > 0 and not resent then
    argv_in_slices('RPUSH', KEYS[1], at, at + records - 1)
  end
  at = at + records
  argv_in_slices('ZADD', KEYS[2], at, at + 2 * summaries - 1)
  at = at + 2 * summaries
  local newest = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  local last = newest and newest[1]
  for _ = 1, entries do
    local id, count = ARGV[at], tonumber(ARGV[at + 1])
    if not id or not count or count < 1 or at + 1 + 2 * count > #ARGV then
      fail('INVALID', {reason = 'seal chunk items do not match their counts'})
    end
    if not last or entry_after(id, last) then
      redis.call('XADD', KEYS[3], id, unpack(ARGV, at + 2, at + 1 + 2 * count))
    end
    at = at + 2 + 2 * count
  end
  if at ~= #ARGV + 1 then
    fail('INVALID', {reason = 'seal chunk items do not match their counts'})
  end
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIRE', key, ttl)
  end
  return redis.call('LLEN', KEYS[1])
end)

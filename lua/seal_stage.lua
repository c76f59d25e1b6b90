-- seal_stage.lua: add one bounded chunk of a chat's sealed copy to its staging keys (ctxstore
-- migrate --encrypt seals a chat written without encryption; docs/encryption.md).
-- KEYS[1] staged_log      the chat's records, sealed, in log order
-- KEYS[2] staged_summary  its summaries, sealed, by position
-- KEYS[3] staged_stream   its answer streams' entries, the pieces of text sealed
-- KEYS[4] staged_chat     its title and metadata values: "r:<field>" -> the value as read,
--                         "s:<field>" -> the value sealed (field: "title" or "m:<key>")
-- ARGV[1] first    how many records the staging log holds before this chunk
-- ARGV[2] ttl      milliseconds the staging keys live after this chunk (a run that stops, its
--                  process dead, leaves nothing behind for long)
-- ARGV[3] counts   "records\tsummaries\tentries\tvalues" of this chunk
-- ARGV[4..] items  the records; then score, member pairs of summaries; then the stream entries
--                  in id order, each its id, its count of fields n, then n field, value pairs;
--                  then field, value as read, value sealed triplets of the chat hash
-- Reply: the records the staging log holds after this chunk
-- Errors: INVALID (counts that do not match the items), CONFLICT seal_lost (the staging log
--         does not hold `first` records: it expired, or a chunk went missing).
--
-- The staging keys are no chat's: no read looks at them, and seal_publish.lua puts them in
-- place at once. A resent chunk (after a lost reply) adds nothing twice: the log is left as it
-- is, the sorted set and the hash take the same entries again, and a chunk of stream entries
-- whose first one is staged already is skipped.

local function mismatch()
  fail('INVALID', {reason = 'seal chunk items do not match their counts'})
end

return run(function()
  local first, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
  local records, summaries, entries, values =
    string.match(ARGV[3], '^(%d+)\t(%d+)\t(%d+)\t(%d+)$')
  if not first or not ttl or not records then
    fail('INVALID', {reason = 'malformed seal chunk arguments'})
  end
  records, summaries = tonumber(records), tonumber(summaries)
  entries, values = tonumber(entries), tonumber(values)
  local length = redis.call('LLEN', KEYS[1])
  local resent = records > 0 and length == first + records
  if length ~= first and not resent then
    fail('CONFLICT', {reason = 'seal_lost', expected = first, found = length})
  end
  local at = 4
  if records > 0 and not resent then
    argv_in_slices(ARGV, 'RPUSH', KEYS[1], at, at + records - 1)
  end
  at = at + records
  argv_in_slices(ARGV, 'ZADD', KEYS[2], at, at + 2 * summaries - 1)
  at = at + 2 * summaries
  -- A chunk's entries are added at once or not at all: its first one there is a resend.
  local added = entries > 0 and #redis.call('XRANGE', KEYS[3], ARGV[at], ARGV[at]) > 0
  for _ = 1, entries do
    local id, count = ARGV[at], tonumber(ARGV[at + 1])
    if not id or not count or count < 1 or at + 1 + 2 * count > #ARGV then
      mismatch()
    end
    if not added then
      redis.call('XADD', KEYS[3], id, unpack(ARGV, at + 2, at + 1 + 2 * count))
    end
    at = at + 2 + 2 * count
  end
  if at + 3 * values ~= #ARGV + 1 then
    mismatch()
  end
  for i = at, #ARGV, 3 do
    redis.call('HSET', KEYS[4], 'r:' .. ARGV[i], ARGV[i + 1], 's:' .. ARGV[i], ARGV[i + 2])
  end
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIRE', key, ttl)
  end
  return redis.call('LLEN', KEYS[1])
end)

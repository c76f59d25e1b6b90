-- lg_load.lua: add one bounded chunk of another thread's checkpoints, blobs and writes to a
-- LangGraph thread (copy_thread; ctxstore.integrations.langgraph).
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_ids
-- KEYS[4] lg_blob
-- KEYS[5] lg_writes
-- KEYS[6] lg_values
-- ARGV[1] ttl      the thread's retention in milliseconds, "" for none
-- ARGV[2] counts   "checkpoints\tblobs\twrites" of this chunk
-- ARGV[3..] items  field, value pairs: checkpoint records, then blobs, then writes
-- Reply: 1
-- Errors: INVALID, CORRUPT.
--
-- Applied twice (a resend), it writes the same entries again.

return run(function()
  local checkpoints, blobs, writes = string.match(ARGV[2], '^(%d+)\t(%d+)\t(%d+)$')
  if not checkpoints
      or #ARGV ~= 2 + 2 * (tonumber(checkpoints) + tonumber(blobs) + tonumber(writes)) then
    fail('INVALID', {reason = 'malformed copy arguments'})
  end
  local at = 3
  for _ = 1, tonumber(checkpoints) do
    local field, record = ARGV[at], ARGV[at + 1]
    checkpoint_header(KEYS[1], field, record)
    local split = string.find(field, US, 1, true)
    if not split then
      fail('INVALID', {reason = 'a checkpoint field is "<ns>\\31<id>"'})
    end
    redis.call('HSET', KEYS[1], field, record)
    redis.call('ZADD', KEYS[2], 0, field)
    redis.call('ZADD', KEYS[3], 0, string.sub(field, split + 1) .. US .. string.sub(field, 1, split - 1))
    at = at + 2
  end
  if tonumber(blobs) > 0 then
    argv_in_slices(ARGV, 'HSET', KEYS[4], at, at + 2 * tonumber(blobs) - 1)
  end
  at = at + 2 * tonumber(blobs)
  for _ = 1, tonumber(writes) do
    redis.call('ZADD', KEYS[5], 0, ARGV[at])
    redis.call('HSET', KEYS[6], ARGV[at], ARGV[at + 1])
    at = at + 2
  end
  slide_expiry(ARGV[1] ~= '' and ARGV[1] or nil,
    {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]})
  return 1
end)

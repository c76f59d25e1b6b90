-- lg_put_writes.lua: store the pending writes of one task on a LangGraph checkpoint
-- (ctxstore.integrations.langgraph).
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_ids
-- KEYS[4] lg_blob
-- KEYS[5] lg_writes   "<ns>\31<id>\31<task path>\31<task id>\31<index>\31<channel>", score 0:
--                     lexical order is writes_sort_key order (the index is fixed-width)
-- KEYS[6] lg_values   member -> the write's value
-- ARGV[1] ttl      the thread's retention in milliseconds, "" for none
-- ARGV[2..] writes member, value, replace triplets: replace "1" (a special channel's write,
--                  which a later one replaces) or "0" (kept as first written); a member names
--                  its checkpoint
-- Reply: how many writes were stored
-- Errors: INVALID.
--
-- The checkpoint need not be stored yet: LangGraph sends a step's writes while the put of its
-- checkpoint may still be on its way. Applied twice (a resend), the writes kept as first
-- written stay, the others are written again.

return run(function()
  if (#ARGV - 1) % 3 ~= 0 then
    fail('INVALID', {reason = 'malformed write arguments'})
  end
  local stored = 0
  for i = 2, #ARGV, 3 do
    if ARGV[i + 2] == '1' or redis.call('HEXISTS', KEYS[6], ARGV[i]) == 0 then
      redis.call('ZADD', KEYS[5], 0, ARGV[i])
      redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1])
      stored = stored + 1
    end
  end
  slide_expiry(ARGV[1] ~= '' and ARGV[1] or nil,
    {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]})
  return stored
end)

-- lg_put.lua: store one LangGraph checkpoint and the blobs of its new channel versions
-- (ctxstore.integrations.langgraph).
-- KEYS[1] lg_cp       checkpoint records: "<ns>\31<id>" -> record (see lib/threads.lua)
-- KEYS[2] lg_order    the thread's checkpoints by namespace: "<ns>\31<id>", score 0
-- KEYS[3] lg_ids      the thread's checkpoints across namespaces: "<id>\31<ns>", score 0
-- KEYS[4] lg_blob     channel values, once per version: "<ns>\31<channel>\31<version>" -> value
-- KEYS[5] lg_writes   pending writes in writes_sort_key order (members, see lg_put_writes.lua)
-- KEYS[6] lg_values   the pending writes' values, by member
-- ARGV[1] ns       the checkpoint namespace
-- ARGV[2] id       the checkpoint id
-- ARGV[3] record   the checkpoint record (its header names the parent: "" for none)
-- ARGV[4] ttl      the thread's retention in milliseconds, "" for none
-- ARGV[5..] blobs  field, value pairs of the checkpoint's new channel versions ("" value: the
--                  channel is empty at that version)
-- Reply: 1
-- Errors: CONFLICT parent_missing (the parent is not a checkpoint of the thread: deleted, with
--         the thread, since the caller read it; nothing is written), CORRUPT, INVALID.
--
-- A put applied twice (resent after a lost reply) writes the same fields again.

return run(function()
  local field = ARGV[1] .. US .. ARGV[2]
  if (#ARGV - 4) % 2 ~= 0 then
    fail('INVALID', {reason = 'malformed checkpoint arguments'})
  end
  local parent = checkpoint_header(KEYS[1], field, ARGV[3])
  if parent ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[1] .. US .. parent) == 0 then
    fail('CONFLICT', {reason = 'parent_missing', id = parent})
  end
  redis.call('HSET', KEYS[1], field, ARGV[3])
  redis.call('ZADD', KEYS[2], 0, field)
  redis.call('ZADD', KEYS[3], 0, ARGV[2] .. US .. ARGV[1])
  if #ARGV > 4 then
    argv_in_slices(ARGV, 'HSET', KEYS[4], 5, #ARGV)
  end
  slide_expiry(ARGV[4] ~= '' and ARGV[4] or nil,
    {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]})
  return 1
end)

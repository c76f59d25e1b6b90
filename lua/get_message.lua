-- get_message.lua: read one message.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat      chat hash
-- KEYS[2] log       message records in write order
-- KEYS[3] alias     chosen message id -> position
-- KEYS[4] runs      run starts (the parent's position)
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- ARGV[3] id        the message id
-- Reply: {position, record, parent position (-1 for a root), parent record ("" for a root),
--         incarnation}
-- Errors: NOT_FOUND (chat, message), CORRUPT (a record missing), REPLACED.
-- The parent's record comes along because its id may be a chosen one, kept in its record.

return run(function()
  local _, inc = open_chat(KEYS[1], ARGV[1], ARGV[2])
  local pos = require_position(KEYS[3], KEYS[2], inc, ARGV[3])
  local parent = parent_at(KEYS[4], pos)
  local records = {redis.call('LINDEX', KEYS[2], pos), ''}
  if parent >= 0 then
    records[2] = redis.call('LINDEX', KEYS[2], parent)
  end
  if not records[1] or not records[2] then
    fail('CORRUPT', {key = KEYS[2], field = tostring(pos), reason = 'message without a record'})
  end
  return {pos, records[1], parent, records[2], inc}
end)

-- get_checkpoint.lua: one checkpoint.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any
-- ARGV[3] name         the checkpoint name
-- Reply: checkpoint record
-- Errors: NOT_FOUND (chat, checkpoint), REPLACED.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  local raw = redis.call('HGET', KEYS[2], ARGV[3])
  if not raw then
    fail('NOT_FOUND', {what = 'checkpoint', id = ARGV[3]})
  end
  return raw
end)

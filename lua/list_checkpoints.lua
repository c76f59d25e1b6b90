-- list_checkpoints.lua: every checkpoint of a chat.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any
-- Reply: flat {name, record, ...} (unordered; the caller sorts newest first)
-- Errors: NOT_FOUND (chat), REPLACED.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  return redis.call('HGETALL', KEYS[2])
end)

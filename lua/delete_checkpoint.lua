-- delete_checkpoint.lua: remove a checkpoint (the message it named stays).
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any
-- ARGV[3] name         the checkpoint name
-- Reply: 1 when it existed, 0 otherwise
-- Errors: NOT_FOUND (chat), FORBIDDEN, REPLACED.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  return redis.call('HDEL', KEYS[2], ARGV[3])
end)

-- delete_checkpoint.lua: remove a checkpoint (the message it named stays).
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] name         the checkpoint name
-- Reply: 1 when it existed, 0 otherwise
-- Errors: NOT_FOUND (chat).

return run(function()
  require_chat(KEYS[1])
  return redis.call('HDEL', KEYS[2], ARGV[1])
end)

-- list_checkpoints.lua: every checkpoint of a chat.
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- Reply: flat {name, record JSON, ...} (unordered; the caller sorts newest first)
-- Errors: NOT_FOUND (chat).

return run(function()
  require_chat(KEYS[1])
  return redis.call('HGETALL', KEYS[2])
end)

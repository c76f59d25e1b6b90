-- get_chat.lua: read a chat's hash.
-- KEYS[1] chat      chat hash
-- Reply: flat HGETALL of the chat hash
-- Errors: NOT_FOUND when the chat does not exist.

return run(function()
  require_chat(KEYS[1])
  return redis.call('HGETALL', KEYS[1])
end)

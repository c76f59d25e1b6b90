-- get_chat.lua: read a chat's hash.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat      chat hash
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- Reply: flat HGETALL of the chat hash
-- Errors: NOT_FOUND when the chat does not exist, REPLACED.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  return redis.call('HGETALL', KEYS[1])
end)

-- add_usage.lua: add token counts to a chat's usage counters.
-- KEYS[1] chat      chat hash
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- ARGV[3..] field, increment pairs ("u:<counter>" -> non-negative integer)
-- Reply: flat list of every usage field and its new value
-- Errors: NOT_FOUND when the chat does not exist, FORBIDDEN, REPLACED.
-- HINCRBY makes concurrent additions from many workers all count.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  local reply = {}
  for i = 3, #ARGV, 2 do
    reply[#reply + 1] = ARGV[i]
    reply[#reply + 1] = redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  end
  return reply
end)

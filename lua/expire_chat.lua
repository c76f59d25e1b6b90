-- expire_chat.lua: set or clear a chat's retention, and run it from now.
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records
-- KEYS[3] alias        chosen message id -> position
-- KEYS[4] runs         run starts
-- KEYS[5] branch       branch name -> branch record
-- KEYS[6] checkpoint   checkpoint name -> checkpoint record
-- KEYS[7] summary      summaries
-- KEYS[8] tok          token entries
-- KEYS[9] reqs         the ring of recent writes' reply summaries (slides with the rest)
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] ttl          milliseconds, or "" for no expiry
-- Reply: the retention now (milliseconds, or "" for none)
-- Errors: NOT_FOUND, REPLACED, INVALID (ttl not a positive whole number).
-- With a ttl, every key of the chat expires that long from now and every later write slides it
-- (see slide_expiry); without one, the `ttl` field goes and every key persists.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2], {})
  local ttl = ttl_argument(ARGV[3])
  set_retention(KEYS[1], ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
                               KEYS[8], KEYS[9]})
  return ARGV[3]
end)

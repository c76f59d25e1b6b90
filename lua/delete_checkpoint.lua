-- delete_checkpoint.lua: remove a checkpoint (the message it named stays).
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- KEYS[3] req          request id -> reply summary (this generation)
-- KEYS[4] req_old      request id -> reply summary (the previous generation)
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] name         the checkpoint name
-- ARGV[4] request      the call's request id: a resent call (its reply lost) answers like the
--                      first one (1 when that one deleted the checkpoint)
-- ARGV[5] now          epoch milliseconds
-- Reply: 1 when it existed, 0 otherwise
-- Errors: NOT_FOUND (chat), FORBIDDEN, REPLACED.

return run(function()
  local _, _, fields, fence = open_chat(KEYS[1], ARGV[1], ARGV[2], {'req_since'}, true)
  local prior = recall_request(KEYS[3], KEYS[4], ARGV[4])
  if prior then
    return tonumber(prior)
  end
  check_fence(KEYS[1], fence)
  local deleted = redis.call('HDEL', KEYS[2], ARGV[3])
  remember_request(KEYS[1], KEYS[3], KEYS[4], ARGV[4], tostring(deleted), fields[1],
                   tonumber(ARGV[5]))
  return deleted
end)

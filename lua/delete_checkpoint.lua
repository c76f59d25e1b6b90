-- delete_checkpoint.lua: remove a checkpoint (the message it named stays).
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- KEYS[3] reqs         the ring of recent writes' reply summaries (see lib/requests.lua)
-- KEYS[4] log          the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[5] alias
-- KEYS[6] runs
-- KEYS[7] branch
-- KEYS[8] summary
-- KEYS[9] tok
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] name         the checkpoint name
-- ARGV[4] request      the call's request id: a resent call (its reply lost) answers like the
--                      first one (1 when that one deleted the checkpoint)
-- Reply: 1 when it existed, 0 otherwise; a resent call's: {the first call's reply, 'resent'}
-- Errors: NOT_FOUND (chat), REPLACED.

return run(function()
  local _, _, fields, fence = open_chat(KEYS[1], ARGV[1], ARGV[2], {'req_slot', 'ttl'}, true)
  local slot = request_slot(KEYS[1], fields[1])
  local ttl = chat_ttl(KEYS[1], fields[2])
  local prior = recall_request(KEYS[3], request_argument(ARGV[4]))
  if prior then
    if prior ~= '0' and prior ~= '1' then
      corrupt(KEYS[3], ARGV[4], 'not the summary of a checkpoint deletion')
    end
    return {tonumber(prior), 'resent'}
  end
  check_fence(KEYS[1], fence)
  local deleted = redis.call('HDEL', KEYS[2], ARGV[3])
  remember_in_chat(KEYS[1], KEYS[3], ARGV[4], tostring(deleted), slot)
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return deleted
end)

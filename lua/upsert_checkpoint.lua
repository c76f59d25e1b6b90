-- upsert_checkpoint.lua: name a message; an existing checkpoint of that name moves.
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records (its length bounds positions)
-- KEYS[3] alias        chosen message id -> position
-- KEYS[4] checkpoint   checkpoint name -> checkpoint record
-- KEYS[5] reqs         the ring of recent writes' reply summaries (see lib/requests.lua)
-- KEYS[6] runs         the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[7] branch
-- KEYS[8] summary
-- KEYS[9] tok
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] name         the checkpoint name
-- ARGV[4] message_id   the message it names
-- ARGV[5] now          epoch milliseconds
-- ARGV[6] request      the call's request id: a resent call (its reply lost) answers with the
--                      record the first one wrote instead of moving the checkpoint again
-- Reply: checkpoint record; a resent call's: {the first call's record, 'resent'}
-- Errors: NOT_FOUND (chat, message), REPLACED, CORRUPT.

return run(function()
  local _, inc, fields, fence = open_chat(KEYS[1], ARGV[1], ARGV[2], {'req_slot', 'ttl'}, true)
  local slot = request_slot(KEYS[1], fields[1])
  local ttl = chat_ttl(KEYS[1], fields[2])
  local prior = recall_request(KEYS[5], request_argument(ARGV[6]))
  if prior then
    return {prior, 'resent'}
  end
  check_fence(KEYS[1], fence)
  local pos = require_position(KEYS[3], KEYS[2], inc, ARGV[4])
  number_field(KEYS[1], 'checkpoint_seq', redis.call('HGET', KEYS[1], 'checkpoint_seq'), 0)
  local seq = redis.call('HINCRBY', KEYS[1], 'checkpoint_seq', 1)
  local raw = pos .. '\t' .. ARGV[4] .. '\t' .. ARGV[5] .. '\t' .. seq
  redis.call('HSET', KEYS[4], ARGV[3], raw)
  remember_in_chat(KEYS[1], KEYS[5], ARGV[6], raw, slot)
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return raw
end)

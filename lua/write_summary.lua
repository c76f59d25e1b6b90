-- write_summary.lua: attach a summary to the last message it covers, once.
-- KEYS[1] chat       chat hash
-- KEYS[2] log        message records in write order
-- KEYS[3] alias      chosen message id -> position
-- KEYS[4] runs       run starts
-- KEYS[5] summary    summaries by the position of the last message they cover
-- KEYS[6] tok        token entries
-- KEYS[7] branch     the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[8] checkpoint
-- KEYS[9] reqs
-- ARGV[1] user       the caller, "" for anyone: another owner's chat is refused
-- ARGV[2] inc        the incarnation the caller knows, "" for any
-- ARGV[3] message    the id of the last message the summary covers
-- ARGV[4] member     the summary's tokens (5 bytes, big-endian) then its msgpack record
-- ARGV[5] job        the compaction marker this summary settles ("" for none): cleared when it
--                    is still the chat's
-- Reply: {position, written (1, or 0 when a summary of that message existed: it is returned
--         and nothing is written), member, chain tokens through the message, depth of the
--         message}
-- Errors: NOT_FOUND (chat, message), INVALID (member too short), CORRUPT (also a sealed
--         summary for a chat in the clear), SEALED (a summary in the clear for a sealed chat),
--         REPLACED.
--
-- A summary hangs on a message, so it applies to every branch whose chain holds that message
-- and to none forked before it; messages appended while it was made are after it, untouched.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'ttl', 'fmt'})
  local ttl = chat_ttl(KEYS[1], fields[1])
  local pos = require_position(KEYS[3], KEYS[2], inc, ARGV[3])
  if #ARGV[4] <= SUMMARY_TOKEN_BYTES then
    fail('INVALID', {reason = 'a summary needs its tokens and a record'})
  end
  check_sealed_call(KEYS[1], fields[2], summary_sealed(ARGV[4]))
  local tokens = select(2, tok_at(KEYS[6], pos))
  local depth = depth_at(KEYS[4], pos)
  local existing = redis.call('ZRANGEBYSCORE', KEYS[5], pos, pos, 'LIMIT', 0, 1)[1]
  if existing and not summary_record_ok(existing) then
    corrupt(KEYS[5], tostring(pos), 'not a summary record')
  end
  local written = 0
  local member = existing
  if not existing then
    redis.call('ZADD', KEYS[5], pos, ARGV[4])
    member, written = ARGV[4], 1
  end
  if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'cjob') == ARGV[5] then
    redis.call('HDEL', KEYS[1], 'cjob')
  end
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return {pos, written, member, tokens, depth}
end)

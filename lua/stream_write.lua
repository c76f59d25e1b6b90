-- stream_write.lua: add a piece of an answer's text to its stream and keep the stream live.
-- KEYS[1] chat          chat hash
-- KEYS[2] stream        the entries of the chat's answer streams
-- KEYS[3] stream_state  stream id -> record
-- ARGV[1] user          the caller, "" for anyone
-- ARGV[2] inc           the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] stream        the stream id
-- ARGV[4] write         the number of this write of the stream (1, 2, ...)
-- ARGV[5] now           epoch milliseconds
-- ARGV[6] writer_ttl    milliseconds the stream stays live without another write
-- ARGV[7] max_writes    the most writes a stream takes
-- ARGV[8] text          the text to add ("" only keeps the stream live); in a sealed chat
--                       "<write>:" then the text sealed by the client for this stream and write
-- ARGV[9] sealed        "1" when the text is sealed (a store with encryption), else ""
-- Reply: 1 when written, 0 for a resent write (applied already: nothing is written again)
-- Errors: NOT_FOUND, REPLACED, CONFLICT lease_lost, CONFLICT stream_closed (the
--         stream is not live: it ended, failed, or its writer let its deadline pass), INVALID (a
--         write out of order), LIMIT (past max_writes), CORRUPT (also a sealed text for a chat in
--         the clear), SEALED (a text in the clear for a sealed chat).

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'fmt'})
  check_sealed_call(KEYS[1], fields[1], ARGV[9] == '1')
  local now, ttl, number = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[4])
  local raw = redis.call('HGET', KEYS[3], ARGV[3])
  local r = raw and parse_stream_record(KEYS[3], ARGV[3], raw)
  if not r or r.inc ~= inc or r.state ~= 'live' or r.deadline < now then
    fail('CONFLICT', {reason = 'stream_closed', stream = ARGV[3], state = r and r.state or ''})
  end
  if number <= r.writes then
    return 0
  end
  if number ~= r.writes + 1 then
    fail('INVALID', {reason = 'the writes of a stream come in order', write = number,
                     expected = r.writes + 1})
  end
  if number > tonumber(ARGV[7]) then
    fail('LIMIT', {what = 'writes of an answer stream', limit = tonumber(ARGV[7])})
  end
  if ARGV[8] ~= '' then
    redis.call('XADD', KEYS[2], '*', 's', ARGV[3], 'd', ARGV[8])
  end
  r.writes, r.deadline = number, now + ttl
  redis.call('HSET', KEYS[3], ARGV[3], format_stream_record(r))
  keep_at_least({KEYS[2], KEYS[3]}, ttl + STOPPED_KEPT_MS)
  return 1
end)

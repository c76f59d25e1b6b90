-- stream_end.lua: close an answer's stream: its answer was saved (done) or it failed.
-- KEYS[1] chat          chat hash
-- KEYS[2] stream        the entries of the chat's answer streams
-- KEYS[3] stream_state  stream id -> record
-- ARGV[1] user          the caller, "" for anyone
-- ARGV[2] inc           the incarnation the caller knows, "" for any (no fence: a turn that
--                       lost its lease still records that its stream failed)
-- ARGV[3] stream        the stream id
-- ARGV[4] outcome       "done" or "failed"
-- ARGV[5] detail        the saved answer's message id, or why it failed
-- ARGV[6] now           epoch milliseconds
-- ARGV[7] keep          milliseconds the closed stream stays readable
-- Reply: 1 when the stream is closed with this outcome (a resent call too), 0 when it was closed
--        already otherwise, or is gone (an answer is "done" only while its stream is live)
-- Errors: NOT_FOUND, REPLACED, INVALID (an outcome other than done or failed),
--         CORRUPT (a record ctxstore did not write: nothing is written).
-- The keys then expire with the last deadline of the chat's streams: a closed stream's keys do
-- not outlive it for its writer's sake.

return run(function()
  local _, inc = open_chat(KEYS[1], ARGV[1], ARGV[2], {})
  local outcome, now = ARGV[4], tonumber(ARGV[6])
  if outcome ~= 'done' and outcome ~= 'failed' then
    fail('INVALID', {reason = 'a stream ends done or failed', outcome = outcome})
  end
  local records = stream_records(KEYS[3])
  local r
  for _, record in ipairs(records) do
    if record.sid == ARGV[3] then
      r = record
    end
  end
  if not r or r.inc ~= inc then
    return 0
  end
  if r.state ~= 'live' then
    if r.state == outcome and r.detail == ARGV[5] then
      return 1
    end
    return 0
  end
  if outcome == 'done' and r.deadline < now then
    return 0  -- its readers were told it stopped: it stays so
  end
  local field = 'e'
  if outcome == 'failed' then
    field = 'f'
  end
  redis.call('XADD', KEYS[2], '*', 's', ARGV[3], field, ARGV[5])
  r.state, r.deadline, r.detail = outcome, now + tonumber(ARGV[7]), ARGV[5]
  redis.call('HSET', KEYS[3], ARGV[3], format_stream_record(r))
  expire_with_records({KEYS[2], KEYS[3]}, records, now)
  return 1
end)

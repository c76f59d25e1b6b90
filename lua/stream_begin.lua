-- stream_begin.lua: start an answer's stream: its first entry and its record, live.
-- KEYS[1] chat          chat hash
-- KEYS[2] stream        the entries of the chat's answer streams (a Redis Stream)
-- KEYS[3] stream_state  stream id -> record of each answer stream kept
-- ARGV[1] user          the caller, "" for anyone
-- ARGV[2] inc           the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] branch        the branch the answer is for
-- ARGV[4] tag           6 random characters: the stream id's tail; a resent call carries the same
-- ARGV[5] now           epoch milliseconds
-- ARGV[6] writer_ttl    milliseconds the stream stays live without a write
-- ARGV[7] max_streams   the most answer streams a chat keeps at once
-- Reply: the stream id, "<id of its first entry>.<tag>"
-- Errors: NOT_FOUND, REPLACED, CONFLICT lease_lost, CORRUPT (a record ctxstore did
--         not write: nothing is written), LIMIT (max_streams answers are live at once).
-- Records past their deadline (and any of an older incarnation of the chat) are dropped; when
-- the chat still keeps max_streams, the oldest finished ones go too. The entries older than the
-- oldest stream kept are trimmed, so the Redis Stream holds only what some record names.

return run(function()
  local _, inc = open_chat(KEYS[1], ARGV[1], ARGV[2], {})
  local now, ttl, most = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local kept, dropped = {}, {}
  for _, r in ipairs(stream_records(KEYS[3])) do
    if r.tag == ARGV[4] and r.inc == inc and r.state == 'live' and r.branch == ARGV[3] then
      return r.sid  -- a resent call: its stream began already
    end
    if r.inc ~= inc or r.deadline < now then
      dropped[#dropped + 1] = r.sid
    else
      kept[#kept + 1] = r
    end
  end
  local excess = #kept - most + 1
  local left = {}
  for _, r in ipairs(kept) do
    if excess > 0 and r.state ~= 'live' then
      dropped[#dropped + 1] = r.sid
      excess = excess - 1
    else
      left[#left + 1] = r
    end
  end
  if excess > 0 then
    fail('LIMIT', {what = 'answer streams live at once', limit = most, size = #kept})
  end
  in_slices('HDEL', KEYS[3], dropped)
  if #left > 0 then
    redis.call('XTRIM', KEYS[2], 'MINID', left[1].ms .. '-' .. left[1].seq)
  else
    redis.call('DEL', KEYS[2])
  end
  local first = redis.call('XADD', KEYS[2], '*', 't', ARGV[4])
  local sid = first .. '.' .. ARGV[4]
  local record = {inc = inc, branch = ARGV[3], state = 'live', deadline = now + ttl, writes = 0,
                  detail = ''}
  redis.call('HSET', KEYS[3], sid, format_stream_record(record))
  left[#left + 1] = record
  expire_with_records({KEYS[2], KEYS[3]}, left, now)
  return sid
end)

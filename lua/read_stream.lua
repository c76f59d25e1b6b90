-- read_stream.lua: the pieces of an answer's text after a cursor, and where its stream stands.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat          chat hash
-- KEYS[2] stream        the entries of the chat's answer streams
-- KEYS[3] stream_state  stream id -> record
-- ARGV[1] user          the caller, "" for anyone
-- ARGV[2] inc           the incarnation the caller knows, "" for any
-- ARGV[3] stream        the stream id
-- ARGV[4] cursor        an entry id: read the entries after it
-- ARGV[5] count         the most entries to look at
-- ARGV[6] now           epoch milliseconds
-- Reply: {state, cursor, detail, {entry id, text, ...}}: the pieces of this stream among the
--        entries looked at, the last entry looked at, and state: "done" (detail: the saved
--        message id) or "failed" (detail: why) once its last entry was read, "stopped" (its
--        writer let its deadline pass without ending it), "live" (read again when more comes),
--        "more" (count entries were looked at: read again from the cursor)
-- Errors: NOT_FOUND (what "stream": no such stream in this chat, or it expired),
--         REPLACED, INVALID (a cursor that is not an entry id), CORRUPT.

return run(function()
  local _, inc = open_chat(KEYS[1], ARGV[1], ARGV[2], {})
  local now, count = tonumber(ARGV[6]), tonumber(ARGV[5])
  if not string.find(ARGV[4], '^%d+%-%d+$') then
    fail('INVALID', {reason = 'a cursor is an entry id', cursor = ARGV[4]})
  end
  local raw = redis.call('HGET', KEYS[3], ARGV[3])
  local r = raw and parse_stream_record(KEYS[3], ARGV[3], raw)
  if not r or r.inc ~= inc or (r.state ~= 'live' and r.deadline < now) then
    fail('NOT_FOUND', {what = 'stream', id = ARGV[3]})
  end
  local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[4], '+', 'COUNT', count)
  local pieces, cursor = {}, ARGV[4]
  for _, entry in ipairs(entries) do
    cursor = entry[1]
    local fields = entry[2]
    if fields[1] == 's' and fields[2] == ARGV[3] then
      local kind, value = fields[3], fields[4]
      if #fields ~= 4 or not value then
        corrupt(KEYS[2], entry[1], 'not an answer stream entry')
      end
      if kind == 'd' then
        pieces[#pieces + 1] = entry[1]
        pieces[#pieces + 1] = value
      elseif kind == 'e' then
        return {'done', cursor, value, pieces}
      elseif kind == 'f' then
        return {'failed', cursor, value, pieces}
      else
        corrupt(KEYS[2], entry[1], 'not an answer stream entry')
      end
    end
  end
  if #entries >= count then
    return {'more', cursor, '', pieces}
  end
  if r.state == 'live' then
    if r.deadline < now then
      return {'stopped', cursor, '', pieces}
    end
    return {'live', cursor, '', pieces}
  end
  return {r.state, cursor, r.detail, pieces}
end)

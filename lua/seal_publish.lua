-- seal_publish.lua: put a chat's sealed copy in place of its values in the clear, at once
-- (ctxstore migrate --encrypt; docs/encryption.md), if nothing changed since it was read.
-- KEYS[1] chat            chat hash
-- KEYS[2] log             the chat's keys whose values are sealed
-- KEYS[3] summary
-- KEYS[4] stream
-- KEYS[5] stream_state    stream id -> record (a live answer stream refuses the seal)
-- KEYS[6] staged_log      what seal_stage.lua built, in the order of KEYS[2..4]
-- KEYS[7] staged_summary
-- KEYS[8] staged_stream
-- KEYS[9] staged_chat     the title and metadata values as read and sealed
-- ARGV[1] inc       the incarnation the copy was sealed for
-- ARGV[2] read      "<records>\t<rgen>\t<summaries>\t<stream entries>\t<last entry id, or ->
--                   \t<values>" as the copy was read (values: the title and metadata values
--                   staged, every one the chat hash held)
-- ARGV[3] now       epoch milliseconds
-- Reply: "sealed" (also to this call resent after its reply was lost), or "current" (another
--        run sealed the chat: nothing is written)
-- Errors: NOT_FOUND, FORMAT (a format this release does not read), CONFLICT changed (a write
--         since the copy was read, or the chat was re-created: read it again), CONFLICT
--         streaming (an answer is being streamed into it), CONFLICT seal_lost (the staging keys
--         do not hold the copy), INVALID, CORRUPT; nothing is written on any error.
--
-- Records, summaries and stream entries change only by growing, and in place only by a
-- redaction, which moves the chat's `rgen`: their counts, the stream's last entry and `rgen`
-- say the copy is of what is there. The title and metadata values are compared one by one with
-- the staged ones (staged, not sent: a chat of 1,900 metadata keys stays within a call's
-- 3,999 arguments). The staging keys are renamed into place (O(1) each), each keeping the
-- expiry of the key it replaces, so a chat's retention is not moved by its migration; `rgen`
-- moves, as after a redaction, so a chain a process cached before is read again (and refused
-- by a process without encryption).

local function changed(what)
  fail('CONFLICT', {reason = 'changed', what = what})
end

return run(function()
  local chat = KEYS[1]
  local _, inc, fields = open_chat(chat, '', '', {'fmt', 'rgen'})
  local read = {string.match(ARGV[2], '^(%d+)\t(%d+)\t(%d+)\t(%d+)\t([-%d]+)\t(%d+)$')}
  if #read ~= 6 or #ARGV ~= 3 then
    fail('INVALID', {reason = 'malformed seal arguments'})
  end
  local rgen = number_field(chat, 'rgen', fields[2], 0)
  if fields[1] == SEALED_FORMAT then
    redis.call('DEL', KEYS[6], KEYS[7], KEYS[8], KEYS[9])
    if inc == ARGV[1] and rgen == tonumber(read[2]) + 1 then
      return 'sealed'  -- this call, resent after its reply was lost
    end
    return 'current'
  end
  if fields[1] ~= FORMAT then
    fail('FORMAT', {format = fields[1]})
  end
  if inc ~= ARGV[1] then
    changed('incarnation')
  end
  local last = read[5] == '-' or redis.call('XRANGE', KEYS[4], read[5], '+', 'COUNT', 2)
  if redis.call('LLEN', KEYS[2]) ~= tonumber(read[1])
      or rgen ~= tonumber(read[2])
      or redis.call('ZCARD', KEYS[3]) ~= tonumber(read[3])
      or redis.call('XLEN', KEYS[4]) ~= tonumber(read[4])
      or (last ~= true and (#last ~= 1 or last[1][1] ~= read[5])) then
    changed('records')  -- (the entry read last must still be the last one)
  end
  local staged = redis.call('HGETALL', KEYS[9])
  if #staged ~= 4 * tonumber(read[6]) then
    fail('CONFLICT', {reason = 'seal_lost'})
  end
  local was, sealed = {}, {}
  for i = 1, #staged, 2 do
    local kind, field = string.sub(staged[i], 1, 2), string.sub(staged[i], 3)
    if kind == 'r:' then
      was[field] = staged[i + 1]
    else
      sealed[#sealed + 1], sealed[#sealed + 2] = field, staged[i + 1]
    end
  end
  local flat = redis.call('HGETALL', chat)
  for i = 1, #flat, 2 do
    local field = flat[i]
    if field == 'title' or string.sub(field, 1, 2) == 'm:' then
      if was[field] ~= flat[i + 1] then
        changed(field == 'title' and 'title' or 'metadata')
      end
      was[field] = nil
    end
  end
  if next(was) then
    changed('metadata')
  end
  local now = tonumber(ARGV[3])
  for _, r in ipairs(stream_records(KEYS[5])) do
    if r.state == 'live' and r.deadline >= now then
      fail('CONFLICT', {reason = 'streaming', stream = r.sid})
    end
  end
  if redis.call('LLEN', KEYS[6]) ~= tonumber(read[1])
      or redis.call('ZCARD', KEYS[7]) ~= tonumber(read[3])
      or redis.call('XLEN', KEYS[8]) ~= tonumber(read[4]) then
    fail('CONFLICT', {reason = 'seal_lost'})
  end

  for i = 2, 4 do
    local target, copy = KEYS[i], KEYS[i + 4]
    if redis.call('EXISTS', copy) == 1 then
      local left = redis.call('PTTL', target)
      redis.call('RENAME', copy, target)
      if left > 0 then
        redis.call('PEXPIRE', target, left)
      else
        redis.call('PERSIST', target)
      end
    end
  end
  if #sealed > 0 then
    in_slices('HSET', chat, sealed)
  end
  redis.call('DEL', KEYS[9])
  redis.call('HSET', chat, 'fmt', SEALED_FORMAT)
  redis.call('HINCRBY', chat, 'rgen', 1)  -- its records were rewritten: no cached chain stands
  return 'sealed'
end)

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
-- ARGV[1] inc       the incarnation the copy was sealed for
-- ARGV[2] read      "<records>\t<rgen>\t<summaries>\t<stream entries>\t<last entry id, or ->"
--                   as the copy was read
-- ARGV[3] now       epoch milliseconds
-- ARGV[4] title     "" for a chat without a title, else "=" then the title as read
-- ARGV[5] sealed    the title sealed ("" for none)
-- ARGV[6..] metadata  triplets: field ("m:<key>"), its value as read, its value sealed; every
--                   metadata field of the chat
-- Reply: "sealed" (also to this call resent after its reply was lost), or "current" (another
--        run sealed the chat: nothing is written)
-- Errors: NOT_FOUND, FORMAT (a format this release does not read), CONFLICT changed (a write
--         since the copy was read, or the chat was re-created: read it again), CONFLICT
--         streaming (an answer is being streamed into it), CONFLICT seal_lost (the staging keys
--         do not hold the copy), INVALID, CORRUPT; nothing is written on any error.
--
-- Records, summaries and stream entries change only by growing, and in place only by a
-- redaction, which moves the chat's `rgen`: their counts, the stream's last entry and `rgen`
-- say the copy is of what is there. The title and metadata values are compared one by one. The
-- staging keys are renamed into place (O(1) each), each keeping the expiry of the key it
-- replaces, so a chat's retention is not moved by its migration; `rgen` moves, as after a
-- redaction, so a chain a process cached before is read again (and refused by a process
-- without encryption).

local function changed(what)
  fail('CONFLICT', {reason = 'changed', what = what})
end

return run(function()
  local chat = KEYS[1]
  local _, inc, fields = open_chat(chat, '', '', {'fmt', 'rgen', 'title'})
  local read = {string.match(ARGV[2], '^(%d+)\t(%d+)\t(%d+)\t(%d+)\t([-%d]+)$')}
  if #read ~= 5 or #ARGV < 5 or (#ARGV - 5) % 3 ~= 0
      or not (ARGV[4] == '' or string.sub(ARGV[4], 1, 1) == '=')
      or (ARGV[4] == '') ~= (ARGV[5] == '') then
    fail('INVALID', {reason = 'malformed seal arguments'})
  end
  local rgen = number_field(chat, 'rgen', fields[2], 0)
  if fields[1] == SEALED_FORMAT then
    redis.call('DEL', KEYS[6], KEYS[7], KEYS[8])
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
  local newest = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)[1]
  if redis.call('LLEN', KEYS[2]) ~= tonumber(read[1])
      or rgen ~= tonumber(read[2])
      or redis.call('ZCARD', KEYS[3]) ~= tonumber(read[3])
      or redis.call('XLEN', KEYS[4]) ~= tonumber(read[4])
      or (newest and newest[1] or '-') ~= read[5] then
    changed('records')
  end
  if (fields[3] and '=' .. fields[3] or '') ~= ARGV[4] then
    changed('title')
  end
  local flat = redis.call('HGETALL', chat)
  local values = {}
  for i = 1, #flat, 2 do
    if string.sub(flat[i], 1, 2) == 'm:' then
      values[flat[i]] = flat[i + 1]
    end
  end
  local sealed = {}
  for i = 6, #ARGV, 3 do
    if values[ARGV[i]] ~= ARGV[i + 1] then
      changed('metadata')
    end
    values[ARGV[i]] = nil
    sealed[#sealed + 1], sealed[#sealed + 2] = ARGV[i], ARGV[i + 2]
  end
  if next(values) then
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
    local target, staged = KEYS[i], KEYS[i + 4]
    if redis.call('EXISTS', staged) == 1 then
      local left = redis.call('PTTL', target)
      redis.call('RENAME', staged, target)
      if left > 0 then
        redis.call('PEXPIRE', target, left)
      else
        redis.call('PERSIST', target)
      end
    end
  end
  if ARGV[5] ~= '' then
    redis.call('HSET', chat, 'title', ARGV[5])
  end
  if #sealed > 0 then
    in_slices('HSET', chat, sealed)
  end
  redis.call('HSET', chat, 'fmt', SEALED_FORMAT)
  redis.call('HINCRBY', chat, 'rgen', 1)  -- its records were rewritten: no cached chain stands
  return 'sealed'
end)

-- lg_history.lua: the delta history of channels at a LangGraph checkpoint: walking its
-- ancestors, each channel's writes until the nearest ancestor holding a value of it (its seed)
-- (ctxstore.integrations.langgraph; BaseCheckpointSaver.get_delta_channel_history).
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_blob
-- KEYS[4] lg_writes
-- KEYS[5] lg_values
-- ARGV[1] ns       the checkpoint namespace
-- ARGV[2] id       the checkpoint id, "" for the namespace's latest
-- ARGV[3] bound    the most ancestors walked
-- ARGV[4..] channels
-- Reply: {per channel in ARGV order: {seed ("" when none: the walk reached the root or its
--        bound), found ("1" when a seed was found), {member, value, ...} of its writes, newest
--        ancestor first and each ancestor's in writes_sort_key order}}
-- Errors: CORRUPT.
--
-- A seed is the channel's value at its ancestor, before that ancestor's own writes, so the
-- seed ancestor's writes are collected too; the target checkpoint's own writes are pending for
-- the next step and left out.

return run(function()
  local ns, id, bound = ARGV[1], ARGV[2], tonumber(ARGV[3])
  if id == '' then
    local low, high = prefix_range(ns)
    local latest = redis.call('ZREVRANGEBYLEX', KEYS[2], high, low, 'LIMIT', 0, 1)[1]
    id = latest and string.sub(latest, #ns + 2) or ''
  end
  local remaining, count = {}, 0
  local seeds, found, writes = {}, {}, {}
  for i = 4, #ARGV do
    remaining[ARGV[i]] = true
    count = count + 1
    writes[ARGV[i]] = {}
  end
  local record = id ~= '' and redis.call('HGET', KEYS[1], ns .. US .. id)
  local current = record and checkpoint_header(KEYS[1], ns .. US .. id, record) or ''
  local walked = 0
  while current ~= '' and count > 0 and walked < bound do
    local field = ns .. US .. current
    record = redis.call('HGET', KEYS[1], field)
    if not record then
      break
    end
    walked = walked + 1
    local parent, _, versions = checkpoint_header(KEYS[1], field, record)
    local low, high = prefix_range(field)
    for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[4], low, high)) do
      local channel = string.match(member, '\31([^\31]*)$')
      if remaining[channel] then
        local list = writes[channel]
        list[#list + 1] = member
        list[#list + 1] = redis.call('HGET', KEYS[5], member) or ''
      end
    end
    for channel in pairs(remaining) do
      local version = versions[channel]
      if version then
        local value = redis.call('HGET', KEYS[3], ns .. US .. channel .. US .. version)
        if value and value ~= '' then
          seeds[channel], found[channel] = value, '1'
          remaining[channel] = nil
          count = count - 1
        end
      end
    end
    current = parent
  end
  local reply = {}
  for i = 4, #ARGV do
    reply[#reply + 1] = {seeds[ARGV[i]] or '', found[ARGV[i]] or '', writes[ARGV[i]]}
  end
  return reply
end)

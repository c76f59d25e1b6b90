-- lg_list.lua: one page of a LangGraph thread's checkpoints, newest first, each with its
-- channel values and pending writes (ctxstore.integrations.langgraph).
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_ids
-- KEYS[4] lg_blob
-- KEYS[5] lg_writes
-- KEYS[6] lg_values
-- ARGV[1] ns       "=" then the namespace, or "*" for every namespace
-- ARGV[2] before   the page starts before this member of lg_order (one namespace) or of lg_ids
--                  (every namespace): "" for the newest
-- ARGV[3] count    the most checkpoints the page holds
-- Reply: {checkpoint, ...}, each as lg_get.lua's reply
-- Errors: CORRUPT.

return run(function()
  local count, before = tonumber(ARGV[3]), ARGV[2]
  local reading = {KEYS[1], KEYS[4], KEYS[5], KEYS[6]}
  local page = {}
  if string.sub(ARGV[1], 1, 1) == '=' then
    local ns = string.sub(ARGV[1], 2)
    local low, high = prefix_range(ns)
    if before ~= '' then
      high = '(' .. before
    end
    for _, member in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[2], high, low, 'LIMIT', 0, count)) do
      page[#page + 1] = checkpoint_reply(reading, ns, string.sub(member, #ns + 2))
    end
  else
    local high = before ~= '' and ('(' .. before) or '+'
    for _, member in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[3], high, '-', 'LIMIT', 0, count)) do
      local at = string.find(member, US, 1, true)
      page[#page + 1] = checkpoint_reply(reading, string.sub(member, at + 1), string.sub(member, 1, at - 1))
    end
  end
  return page
end)

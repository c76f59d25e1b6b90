-- lg_get.lua: one LangGraph checkpoint, with its channel values and pending writes: the latest
-- of a namespace, or the one named (ctxstore.integrations.langgraph).
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_blob
-- KEYS[4] lg_writes
-- KEYS[5] lg_values
-- ARGV[1] ns   the checkpoint namespace
-- ARGV[2] id   the checkpoint id, "" for the namespace's latest
-- Reply: {ns, id, record, blobs, writes} (see lib/threads.lua's checkpoint_reply), or {} when
--        there is no such checkpoint
-- Errors: CORRUPT.

return run(function()
  local id = ARGV[2]
  if id == '' then
    local low, high = prefix_range(ARGV[1])
    local latest = redis.call('ZREVRANGEBYLEX', KEYS[2], high, low, 'LIMIT', 0, 1)[1]
    if not latest then
      return {}
    end
    id = string.sub(latest, #ARGV[1] + 2)
  end
  return checkpoint_reply({KEYS[1], KEYS[3], KEYS[4], KEYS[5]}, ARGV[1], id) or {}
end)

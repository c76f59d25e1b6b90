-- lg_dump.lua: everything a LangGraph thread holds, for copy_thread
-- (ctxstore.integrations.langgraph).
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_blob
-- KEYS[3] lg_values
-- Reply: {the flat HGETALL of KEYS[1], of KEYS[2], of KEYS[3]} (a write's member is its field
--        in KEYS[3]; the orders follow from the names)

return run(function()
  return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),
          redis.call('HGETALL', KEYS[3])}
end)

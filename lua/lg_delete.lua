-- lg_delete.lua: remove every key of a LangGraph thread (ctxstore.integrations.langgraph).
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_ids
-- KEYS[4] lg_blob
-- KEYS[5] lg_writes
-- KEYS[6] lg_values
-- Reply: how many keys were removed
--
-- After it no key of the thread is left; a put whose parent was one of its checkpoints is
-- refused (lg_put.lua), and a thread started again under its id begins empty.

return run(function()
  return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
end)

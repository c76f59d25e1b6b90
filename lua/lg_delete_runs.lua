-- lg_delete_runs.lua: remove a LangGraph thread's checkpoints of the given runs, with their
-- writes (BaseCheckpointSaver.delete_for_runs; ctxstore.integrations.langgraph).
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_ids
-- KEYS[4] lg_blob
-- KEYS[5] lg_writes
-- KEYS[6] lg_values
-- ARGV[1..] run ids
-- Reply: how many checkpoints were removed
-- Errors: CORRUPT.

return run(function()
  local runs = {}
  for i = 1, #ARGV do
    runs[ARGV[i]] = true
  end
  local dropped = {}
  local flat = redis.call('HGETALL', KEYS[1])
  for i = 1, #flat, 2 do
    local _, run_id = checkpoint_header(KEYS[1], flat[i], flat[i + 1])
    if runs[run_id] then
      dropped[#dropped + 1] = flat[i]
    end
  end
  return drop_checkpoints({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}, dropped)
end)

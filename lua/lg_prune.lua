-- lg_prune.lua: keep each namespace's latest LangGraph checkpoint of a thread, and the
-- ancestors its delta channels still need, and remove the rest (BaseCheckpointSaver.prune,
-- "keep_latest"; ctxstore.integrations.langgraph).
-- KEYS[1] lg_cp       as lg_put.lua
-- KEYS[2] lg_order
-- KEYS[3] lg_ids
-- KEYS[4] lg_blob
-- KEYS[5] lg_writes
-- KEYS[6] lg_values
-- Reply: how many checkpoints were removed
-- Errors: CORRUPT.
--
-- A delta channel keeps no value at most checkpoints: its value is rebuilt from the writes
-- since the nearest ancestor holding one (lg_history.lua). So the latest checkpoint is kept
-- with every ancestor back to one that holds a value of each of its channels (each one's own
-- writes with it), and a channel's history never breaks; the blobs no checkpoint left names go.

return run(function()
  local keys = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
  local latest = {}
  for _, field in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    local at = string.find(field, US, 1, true)
    latest[string.sub(field, 1, at - 1)] = string.sub(field, at + 1)  -- lexical: the last wins
  end
  local kept = {}
  for ns, id in pairs(latest) do
    local field = ns .. US .. id
    local record = redis.call('HGET', KEYS[1], field)
    local parent, _, versions = checkpoint_header(KEYS[1], field, record)
    local needed = {}
    for channel, version in pairs(versions) do
      local value = redis.call('HGET', KEYS[4], ns .. US .. channel .. US .. version)
      if not value or value == '' then
        needed[channel] = true
      end
    end
    kept[field] = true
    while next(needed) and parent ~= '' do
      field = ns .. US .. parent
      record = redis.call('HGET', KEYS[1], field)
      if not record then
        break
      end
      kept[field] = true
      parent, _, versions = checkpoint_header(KEYS[1], field, record)
      for channel in pairs(needed) do
        local version = versions[channel]
        local value = version and redis.call('HGET', KEYS[4], ns .. US .. channel .. US .. version)
        if value and value ~= '' then
          needed[channel] = nil
        end
      end
    end
  end
  local dropped = {}
  for _, field in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if not kept[field] then
      dropped[#dropped + 1] = field
    end
  end
  return drop_checkpoints(keys, dropped)
end)

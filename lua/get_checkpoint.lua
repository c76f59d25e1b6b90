-- get_checkpoint.lua: one checkpoint.
-- KEYS[1] chat         chat hash
-- KEYS[2] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] name         the checkpoint name
-- Reply: checkpoint record JSON
-- Errors: NOT_FOUND (chat, checkpoint).

return run(function()
  require_chat(KEYS[1])
  local raw = redis.call('HGET', KEYS[2], ARGV[1])
  if not raw then
    fail('NOT_FOUND', {what = 'checkpoint', id = ARGV[1]})
  end
  return raw
end)

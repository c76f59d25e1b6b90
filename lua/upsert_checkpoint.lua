-- upsert_checkpoint.lua: name a message; an existing checkpoint of that name moves.
-- KEYS[1] chat         chat hash
-- KEYS[2] parent       message id -> parent id (existence of the message)
-- KEYS[3] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] name         the checkpoint name
-- ARGV[2] message_id   the message it names
-- ARGV[3] now          epoch milliseconds
-- Reply: checkpoint record JSON
-- Errors: NOT_FOUND (chat, message).

return run(function()
  require_chat(KEYS[1])
  require_message(KEYS[2], ARGV[2])
  local seq = redis.call('HINCRBY', KEYS[1], 'checkpoint_seq', 1)
  local raw = cjson.encode({message_id = ARGV[2], created_at = tonumber(ARGV[3]), seq = seq})
  redis.call('HSET', KEYS[3], ARGV[1], raw)
  return raw
end)

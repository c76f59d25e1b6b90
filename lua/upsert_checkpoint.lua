-- upsert_checkpoint.lua: name a message; an existing checkpoint of that name moves.
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records (its length bounds positions)
-- KEYS[3] alias        chosen message id -> position
-- KEYS[4] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any
-- ARGV[3] name         the checkpoint name
-- ARGV[4] message_id   the message it names
-- ARGV[5] now          epoch milliseconds
-- Reply: checkpoint record
-- Errors: NOT_FOUND (chat, message), FORBIDDEN, REPLACED, CORRUPT.

return run(function()
  local _, inc = open_chat(KEYS[1], ARGV[1], ARGV[2])
  local pos = require_position(KEYS[3], KEYS[2], inc, ARGV[4])
  number_field(KEYS[1], 'checkpoint_seq', redis.call('HGET', KEYS[1], 'checkpoint_seq'), 0)
  local seq = redis.call('HINCRBY', KEYS[1], 'checkpoint_seq', 1)
  local raw = pos .. '\t' .. ARGV[4] .. '\t' .. ARGV[5] .. '\t' .. seq
  redis.call('HSET', KEYS[4], ARGV[3], raw)
  return raw
end)

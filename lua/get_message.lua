-- get_message.lua: read one message.
-- KEYS[1] chat      chat hash
-- KEYS[2] msg       message id -> msgpack record
-- KEYS[3] parent    message id -> parent id
-- ARGV[1] id        the message id
-- Reply: {record, parent id ("" for a root)}
-- Errors: NOT_FOUND (chat, message), CORRUPT (a message without a record).

return run(function()
  require_chat(KEYS[1])
  local parent = redis.call('HGET', KEYS[3], ARGV[1])
  if not parent then
    fail('NOT_FOUND', {what = 'message', id = ARGV[1]})
  end
  local record = redis.call('HGET', KEYS[2], ARGV[1])
  if not record then
    fail('CORRUPT', {key = KEYS[2], field = ARGV[1], reason = 'message without a record'})
  end
  return {record, parent}
end)

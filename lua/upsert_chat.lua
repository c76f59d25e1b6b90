-- upsert_chat.lua: create a chat (with an empty, active branch "main") or check its owner.
-- KEYS[1] chat      chat hash
-- KEYS[2] branch    branch name -> branch record
-- ARGV[1] user_id   the caller; must own an existing chat
-- ARGV[2] now       epoch milliseconds
-- ARGV[3..] field, value pairs of metadata to merge ("m:<key>" -> msgpack value)
-- Reply: {created (0|1), flat HGETALL of the chat hash}
-- Errors: FORBIDDEN when another user owns the chat.

return run(function()
  local user_id = ARGV[1]
  local now = tonumber(ARGV[2])
  local owner = redis.call('HGET', KEYS[1], 'user_id')
  if owner and owner ~= user_id then
    fail('FORBIDDEN', {what = 'chat'})
  end
  if not owner and redis.call('EXISTS', KEYS[1]) == 1 then
    fail('CORRUPT', {key = KEYS[1], field = 'user_id', reason = 'chat without an owner'})
  end
  local created = 0
  if not owner then
    created = 1
    redis.call('HSET', KEYS[1], 'user_id', user_id, 'created_at', ARGV[2], 'updated_at', ARGV[2],
               'active_branch', 'main', 'message_count', 0, 'branch_count', 0, 'branch_seq', 0)
    create_branch(KEYS[1], KEYS[2], 'main', '', now)
  end
  if #ARGV > 2 then
    redis.call('HSET', KEYS[1], unpack(ARGV, 3))
    touch(KEYS[1], now)
  end
  return {created, redis.call('HGETALL', KEYS[1])}
end)

-- touch_index.lua: move a chat forward in one chat index and say where it stood before.
-- KEYS[1] index     sorted set: chat id -> updated_at
-- ARGV[1] chat_id   the chat written
-- ARGV[2] score     the time of the write; the entry never moves back (ZADD GT)
-- Reply: the entry's score before this call, "" when the chat was not in the index
-- On a Redis Cluster the indexes live in other slots than the chat, so a write sends this
-- beside its own script, in the same round trip. When the write fails, the caller puts the old
-- score back (repair_index.lua, only while the entry still holds this call's score), so a
-- refused write never moves the chat in a listing.

return run(function()
  local before = redis.call('ZSCORE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
  return before or ''
end)

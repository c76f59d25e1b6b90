-- update_chat.lua: replace the title and/or shallow-merge metadata, and bump updated_at.
-- KEYS[1] chat        chat hash
-- ARGV[1] now         epoch milliseconds
-- ARGV[2] set_title   "1" to replace the title with ARGV[3], "0" to keep it
-- ARGV[3] title       the new title
-- ARGV[4..] field, value pairs of metadata to merge ("m:<key>" -> msgpack value)
-- Reply: flat HGETALL of the chat hash
-- Errors: NOT_FOUND when the chat does not exist.
-- Each metadata key is its own hash field, so concurrent merges of different keys all survive.

return run(function()
  require_chat(KEYS[1])
  if ARGV[2] == '1' then
    redis.call('HSET', KEYS[1], 'title', ARGV[3])
  end
  if #ARGV > 3 then
    redis.call('HSET', KEYS[1], unpack(ARGV, 4))
  end
  touch(KEYS[1], tonumber(ARGV[1]))
  return redis.call('HGETALL', KEYS[1])
end)

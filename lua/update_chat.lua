-- update_chat.lua: replace the title and/or shallow-merge metadata, and bump updated_at.
-- KEYS[1] chat        chat hash
-- ARGV[1] user        the caller, "" for anyone
-- ARGV[2] inc         the incarnation the caller knows, "" for any
-- ARGV[3] now         epoch milliseconds
-- ARGV[4] set_title   "1" to replace the title with ARGV[5], "0" to keep it
-- ARGV[5] title       the new title
-- ARGV[6..] field, value pairs of metadata to merge ("m:<key>" -> msgpack value)
-- Reply: flat HGETALL of the chat hash
-- Errors: NOT_FOUND when the chat does not exist, FORBIDDEN, REPLACED.
-- Each metadata key is its own hash field, so concurrent merges of different keys all survive.

return run(function()
  local _, _, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'updated_at'})
  if ARGV[4] == '1' then
    redis.call('HSET', KEYS[1], 'title', ARGV[5])
  end
  if #ARGV > 5 then
    local metadata = {}
    for i = 6, #ARGV do
      metadata[#metadata + 1] = ARGV[i]
    end
    in_slices('HSET', KEYS[1], metadata)
  end
  redis.call('HSET', KEYS[1], 'updated_at', newer(fields[1], tonumber(ARGV[3])))
  return redis.call('HGETALL', KEYS[1])
end)

-- update_chat.lua: replace the title and/or shallow-merge metadata, and bump updated_at.
-- KEYS[1] chat        chat hash
-- KEYS[2] log         the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[3] alias
-- KEYS[4] runs
-- KEYS[5] branch
-- KEYS[6] checkpoint
-- KEYS[7] summary
-- KEYS[8] tok
-- KEYS[9] reqs
-- KEYS[10] all_chats  optional: the namespace's chat index (servers without Cluster only)
-- KEYS[11] user_chats optional: the owner's chat index (with KEYS[10])
-- ARGV[1] user        the caller, "" for anyone
-- ARGV[2] inc         the incarnation the caller knows, "" for any
--                     ("#<fence>" inside a turn)
-- ARGV[3] now         epoch milliseconds
-- ARGV[4] set_title   "1" to replace the title with ARGV[5], "0" to keep it
-- ARGV[5] title       the new title
-- ARGV[6] chat_id     the chat's id, for the index entries ("" without KEYS[10..11])
-- ARGV[7] index_owner the owner the index keys were built for ("" without them)
-- ARGV[8] max_keys    the most metadata keys the chat may hold after the merge
-- ARGV[9] max_bytes   the most bytes of metadata (field names and values) after the merge
-- ARGV[10] sealed     "1" when the title and metadata values are sealed (a store with
--                     encryption), else ""
-- ARGV[11..] field, value pairs of metadata to merge ("m:<key>" -> msgpack value; in a sealed
--                     chat a bin: the value sealed by the client for the chat and the key)
-- Reply: {indexed (0|1), flat HGETALL of the chat hash}
-- Errors: NOT_FOUND when the chat does not exist, REPLACED, LIMIT (the metadata
--         past max_keys / max_bytes once merged; nothing is written, the title included),
--         CORRUPT (a field the reply carries is malformed: checked before anything is written;
--         also sealed values for a chat in the clear), SEALED (values in the clear for a sealed
--         chat).
-- Each metadata key is its own hash field, so concurrent merges of different keys all survive.
-- The index entries move inside the script, so a refused update never moves the chat up.

local FIRST_METADATA_ARG = 11

return run(function()
  local owner, _, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'updated_at', 'ttl', 'fmt'})
  check_sealed_call(KEYS[1], fields[3], ARGV[10] == '1')
  local ttl = chat_ttl(KEYS[1], fields[2])
  if #ARGV >= FIRST_METADATA_ARG then
    check_metadata_merge(KEYS[1], ARGV, FIRST_METADATA_ARG, tonumber(ARGV[8]), tonumber(ARGV[9]),
                         ARGV[10] == '1')
  end
  local replaced = {title = ARGV[4] == '1'}
  for i = FIRST_METADATA_ARG, #ARGV, 2 do
    replaced[ARGV[i]] = true
  end
  check_chat_hash(KEYS[1], replaced)
  local updated_at = newer(number_field(KEYS[1], 'updated_at', fields[1]), tonumber(ARGV[3]))
  if ARGV[4] == '1' then
    redis.call('HSET', KEYS[1], 'title', ARGV[5])
  end
  if #ARGV >= FIRST_METADATA_ARG then
    local metadata = {}
    for i = FIRST_METADATA_ARG, #ARGV do
      metadata[#metadata + 1] = ARGV[i]
    end
    in_slices('HSET', KEYS[1], metadata)
  end
  redis.call('HSET', KEYS[1], 'updated_at', updated_at)
  local indexed = 0
  if KEYS[10] ~= nil and ARGV[7] == owner then
    redis.call('ZADD', KEYS[10], 'GT', updated_at, ARGV[6])
    redis.call('ZADD', KEYS[11], 'GT', updated_at, ARGV[6])
    indexed = 1
  end
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return {indexed, redis.call('HGETALL', KEYS[1])}
end)

-- open_chat.lua: create or open a chat as its owner, and optionally read its active branch.
-- KEYS[1] chat       chat hash
-- KEYS[2] msg        message id -> msgpack record
-- KEYS[3] parent     message id -> parent id
-- KEYS[4] depth      message id -> chain length
-- KEYS[5] branch     branch name -> branch record
-- ARGV[1] user_id    the caller; must own an existing chat
-- ARGV[2] now        epoch milliseconds
-- ARGV[3] load       "1" to return the active branch's chain too, "0" for none
-- ARGV[4] max_depth  the longest chain to walk
-- ARGV[5..] field, value pairs of metadata to merge ("m:<key>" -> msgpack value)
-- Reply: {created (0|1), flat HGETALL of the chat hash, active branch, its record JSON,
--         its chain length, {ids root first}, {records}} (ids and records empty unless load)
-- Errors: FORBIDDEN when another user owns the chat (nothing is written or read), CORRUPT,
--         LIMIT (chain longer than max_depth).
-- This is upsert_chat, and the first call of a context engine: the owner check, the metadata
-- merge and the read of the conversation happen in one script, one round trip.

return run(function()
  local created = upsert_chat(KEYS[1], KEYS[5], ARGV[1], tonumber(ARGV[2]), 5)
  local active = redis.call('HGET', KEYS[1], 'active_branch')
  local record, raw_branch = read_branch(KEYS[5], active)
  local ids, records = {}, {}
  if ARGV[3] == '1' then
    ids, records = read_chain(KEYS[3], KEYS[2], record.head, tonumber(ARGV[4]))
  end
  return {created, redis.call('HGETALL', KEYS[1]), active, raw_branch,
          depth_of(KEYS[4], record.head), ids, records}
end)

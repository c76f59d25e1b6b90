-- migrate_chat.lua: bring one chat to the storage format this release writes (ctxstore
-- migrate, docs/compatibility.md). Idempotent: a chat in that format already is left as it is.
-- KEYS[1] chat        chat hash
-- ARGV[1] target      the format to bring it to: this release's (anything else is INVALID)
-- Reply: {the format it was in, "current" (nothing written) | "upgraded"}; a sealed chat
--        (SEALED_FORMAT: format FORMAT with sealed values) is current.
-- Errors: NOT_FOUND (no such chat), FORMAT (a format this release does not read or cannot
--         upgrade from), CORRUPT (its identity is broken); nothing is written on any error.
-- An upgrade that rewrites more of the chat's keys declares them here, after KEYS[1].

-- One function per format this release upgrades from (the one before its own), each turning
-- a chat of that format into one of FORMAT before its `fmt` field is set. Format 2 is the
-- first format kept, so there is none yet.
local UPGRADES = {}

return run(function()
  if ARGV[1] ~= FORMAT then
    fail('INVALID', {reason = 'this release migrates chats to format ' .. FORMAT .. ' only'})
  end
  open_chat(KEYS[1], '', '')  -- owner, format (FORMAT error) and incarnation checked
  local found = redis.call('HGET', KEYS[1], 'fmt')
  if found == FORMAT or found == SEALED_FORMAT then
    return {found, 'current'}
  end
  local upgrade = UPGRADES[found]
  if not upgrade then
    fail('FORMAT', {format = found})
  end
  upgrade()
  redis.call('HSET', KEYS[1], 'fmt', FORMAT)
  return {found, 'upgraded'}
end)

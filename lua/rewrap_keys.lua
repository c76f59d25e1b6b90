-- rewrap_keys.lua: put a user's data keys, wrapped again under the key provider's current
-- key-encryption key, in place of the ones read (ctxstore rotate-keys). A data key is the same
-- 32 bytes before and after: no record changes. Each is replaced only while it still holds
-- what the caller read (another rotation may have run meanwhile); a resent call replaces
-- nothing more.
-- KEYS[1] dkey        the user's data keys: "current" -> key id, <key id> -> its wrapped key
-- ARGV[1..] triples   key id, the wrapped key read, the same key wrapped again
-- Reply: how many were replaced
-- Errors: INVALID (not triples, "current" named, an empty wrapped key); nothing is written on
--         any error.

return run(function()
  if #ARGV == 0 or #ARGV % 3 ~= 0 then
    fail('INVALID', {reason = 'key id, read, rewrapped triples'})
  end
  for i = 1, #ARGV, 3 do
    if ARGV[i] == 'current' or ARGV[i + 2] == '' then
      fail('INVALID', {reason = 'a data key id and its wrapped key'})
    end
  end
  local replaced = 0
  for i = 1, #ARGV, 3 do
    if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
      redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
      replaced = replaced + 1
    end
  end
  return replaced
end)

-- data_key.lua: a user's data keys, the first one stored when there is none (stores with
-- encryption; docs/encryption.md). Two processes that make a user's first key at once agree
-- on the one stored first; a resent call finds it stored and answers the same.
-- KEYS[1] dkey     the user's data keys: "current" -> key id, <key id> -> its wrapped key
-- ARGV[1] key_id   the id of the data key to store when the user has none
-- ARGV[2] wrapped  that data key, wrapped by the key provider
-- Reply: the flat HGETALL of KEYS[1] after the call
-- Errors: INVALID (a key id that is not 1 to 64 of [A-Za-z0-9._-], or "current"; an empty
--         wrapped key), CORRUPT (a hash without "current"); nothing is written on any error.

return run(function()
  local key_id, wrapped = ARGV[1], ARGV[2]
  if #key_id > 64 or not string.find(key_id, '^[%w._-]+$') or key_id == 'current'
      or wrapped == '' then
    fail('INVALID', {reason = 'a data key needs an id of 1 to 64 of [A-Za-z0-9._-] and a value'})
  end
  if not redis.call('HGET', KEYS[1], 'current') then
    if redis.call('EXISTS', KEYS[1]) == 1 then
      fail('CORRUPT', {key = KEYS[1], field = 'current', reason = 'missing'})
    end
    redis.call('HSET', KEYS[1], 'current', key_id, key_id, wrapped)
  end
  return redis.call('HGETALL', KEYS[1])
end)

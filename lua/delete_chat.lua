-- delete_chat.lua: remove every key of a chat.
-- KEYS[1] chat        chat hash
-- KEYS[2] log         message records
-- KEYS[3] alias       chosen message id -> position
-- KEYS[4] runs        run starts
-- KEYS[5] branch      branch name -> branch record
-- KEYS[6] checkpoint  checkpoint name -> checkpoint record
-- KEYS[7] summary     message id -> summary record
-- KEYS[8] reqs        the ring of recent writes' reply summaries
-- KEYS[9] tok         token entries
-- KEYS[10] stream     the entries of its answer streams
-- KEYS[11] stream_state  the records of its answer streams
-- ARGV[1] user_id     "" to delete whoever owns it; otherwise only that owner's chat
-- ARGV[2] leftovers   "1" (an erasure, whose owner record names this chat): also remove the
--                     keys of a chat whose hash is gone or names no owner (an answer stream
--                     left to expire, a chat broken by hand), instead of leaving them or
--                     refusing; "" or absent otherwise
-- Reply: {deleted (0|1), owner ("" when nothing was deleted), its incarnation ("" when
--         nothing was deleted), keys removed, messages removed, answer-stream entries removed}
-- Another user's chat is answered as a missing one: {0, "", "", 0, 0, 0}, nothing deleted.
-- Errors: CORRUPT when its owner is missing or not a user id (nothing is deleted), unless
--         ARGV[2] is "1".

local function unlink_all()
  return redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
                    KEYS[8], KEYS[9], KEYS[10], KEYS[11])
end

return run(function()
  local leftovers = ARGV[2] == '1'
  local owner = redis.call('HGET', KEYS[1], 'user_id')
  if not owner or not is_key_id(owner) then
    if leftovers then
      local messages, entries = redis.call('LLEN', KEYS[2]), redis.call('XLEN', KEYS[10])
      local removed = unlink_all()
      return {removed > 0 and 1 or 0, '', '', removed, messages, entries}
    end
    if owner then
      corrupt(KEYS[1], 'user_id', 'not a user id')
    end
    if redis.call('EXISTS', KEYS[1]) == 1 then
      corrupt(KEYS[1], 'user_id', 'chat without an owner')
    end
    return {0, '', '', 0, 0, 0}
  end
  if ARGV[1] ~= '' and owner ~= ARGV[1] then
    return {0, '', '', 0, 0, 0}  -- another user's chat: as if there were none (nothing deleted)
  end
  local inc = redis.call('HGET', KEYS[1], 'inc') or ''
  local messages, entries = redis.call('LLEN', KEYS[2]), redis.call('XLEN', KEYS[10])
  return {1, owner, inc, unlink_all(), messages, entries}
end)

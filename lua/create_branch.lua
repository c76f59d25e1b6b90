-- create_branch.lua: a new branch whose head is an existing message, a checkpoint's message,
-- or nothing.
-- KEYS[1] chat        chat hash
-- KEYS[2] parent      message id -> parent id (existence of the start message)
-- KEYS[3] depth       message id -> chain length
-- KEYS[4] branch      branch name -> branch record
-- KEYS[5] checkpoint  checkpoint name -> checkpoint record
-- ARGV[1] at          the start: a message id, a checkpoint name, or "" for an empty branch
-- ARGV[2] base        base for auto-naming (<base>-v<k+1>)
-- ARGV[3] name        explicit name, or "" to auto-name from ARGV[2]
-- ARGV[4] activate    "1" to make it the active branch
-- ARGV[5] now         epoch milliseconds
-- ARGV[6] at_kind     "message" or "checkpoint": how to read ARGV[1]
-- Reply: {name, branch record JSON, active branch, chain length}
-- Errors: NOT_FOUND (chat, message, checkpoint), CONFLICT (explicit name taken).
-- Auto-naming runs inside the script, so two workers forking at once get distinct names;
-- restoring a checkpoint reads it in the same script, so it cannot move in between.

return run(function()
  require_chat(KEYS[1])
  local at = ARGV[1]
  if ARGV[6] == 'checkpoint' then
    local raw = redis.call('HGET', KEYS[5], at)
    if not raw then
      fail('NOT_FOUND', {what = 'checkpoint', id = at})
    end
    at = decode_record(KEYS[5], at, raw).message_id
    if type(at) ~= 'string' then
      fail('CORRUPT', {key = KEYS[5], field = ARGV[1], reason = 'checkpoint without a message'})
    end
  end
  if at ~= '' then
    require_message(KEYS[2], at)
  end
  local name = ARGV[3]
  if name == '' then
    name = branch_namer(KEYS[4])(ARGV[2])
  elseif redis.call('HEXISTS', KEYS[4], name) == 1 then
    fail('CONFLICT', {reason = 'branch_exists', branch = name})
  end
  create_branch(KEYS[1], KEYS[4], name, at, tonumber(ARGV[5]))
  if ARGV[4] == '1' then
    redis.call('HSET', KEYS[1], 'active_branch', name)
  end
  local active = redis.call('HGET', KEYS[1], 'active_branch')
  return {name, redis.call('HGET', KEYS[4], name), active, depth_of(KEYS[3], at)}
end)

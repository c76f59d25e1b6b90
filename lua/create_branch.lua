-- create_branch.lua: a new branch whose head is an existing message (or empty).
-- KEYS[1] chat        chat hash
-- KEYS[2] parent      message id -> parent id (existence of the start message)
-- KEYS[3] depth       message id -> chain length
-- KEYS[4] branch      branch name -> branch record
-- ARGV[1] at          the message the branch starts at ("" for an empty branch)
-- ARGV[2] base        base for auto-naming (<base>-v<k+1>)
-- ARGV[3] name        explicit name, or "" to auto-name from ARGV[2]
-- ARGV[4] activate    "1" to make it the active branch
-- ARGV[5] now         epoch milliseconds
-- Reply: {name, branch record JSON, active branch, chain length}
-- Errors: NOT_FOUND (chat, message), CONFLICT (explicit name taken).
-- Auto-naming runs inside the script, so two workers forking at once get distinct names.

return run(function()
  require_chat(KEYS[1])
  local at = ARGV[1]
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

-- set_active_branch.lua: make an existing branch the chat's one active branch.
-- KEYS[1] chat      chat hash
-- KEYS[2] depth     message id -> chain length
-- KEYS[3] branch    branch name -> branch record
-- ARGV[1] name      the branch
-- Reply: {name, branch record JSON, active branch, chain length}
-- Errors: NOT_FOUND (chat, branch).

return run(function()
  require_chat(KEYS[1])
  local record, raw = read_branch(KEYS[3], ARGV[1])
  redis.call('HSET', KEYS[1], 'active_branch', ARGV[1])
  return {ARGV[1], raw, ARGV[1], depth_of(KEYS[2], record.head)}
end)

-- get_branch.lua: one branch with its head and chain length.
-- KEYS[1] chat      chat hash
-- KEYS[2] depth     message id -> chain length
-- KEYS[3] branch    branch name -> branch record
-- ARGV[1] name      the branch, or "" for the active branch
-- Reply: {name, branch record JSON, active branch, chain length}
-- Errors: NOT_FOUND (chat, branch).

return run(function()
  require_chat(KEYS[1])
  local active = redis.call('HGET', KEYS[1], 'active_branch') or ''
  local name = ARGV[1]
  if name == '' then
    name = active
  end
  local record, raw = read_branch(KEYS[3], name)
  return {name, raw, active, depth_of(KEYS[2], record.head)}
end)

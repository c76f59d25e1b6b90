-- set_active_branch.lua: make an existing branch the chat's one active branch.
-- KEYS[1] chat      chat hash
-- KEYS[2] branch    branch name -> branch record
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] name      the branch
-- Reply: {name, branch record, active branch, incarnation}
-- Errors: NOT_FOUND (chat, branch), FORBIDDEN, REPLACED.

return run(function()
  local _, inc = open_chat(KEYS[1], ARGV[1], ARGV[2])
  local _, raw = read_branch(KEYS[2], ARGV[3])
  redis.call('HSET', KEYS[1], 'active_branch', ARGV[3])
  return {ARGV[3], raw, ARGV[3], inc}
end)

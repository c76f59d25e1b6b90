-- set_active_branch.lua: make an existing branch the chat's one active branch.
-- KEYS[1] chat      chat hash
-- KEYS[2] branch    branch name -> branch record
-- KEYS[3] log       the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[4] alias
-- KEYS[5] runs
-- KEYS[6] checkpoint
-- KEYS[7] summary
-- KEYS[8] tok
-- KEYS[9] reqs
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] name      the branch
-- Reply: {name, branch record, active branch, incarnation}
-- Errors: NOT_FOUND (chat, branch), REPLACED.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'ttl'})
  local ttl = chat_ttl(KEYS[1], fields[1])
  local _, raw = read_branch(KEYS[2], ARGV[3])
  redis.call('HSET', KEYS[1], 'active_branch', ARGV[3])
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return {ARGV[3], raw, ARGV[3], inc}
end)

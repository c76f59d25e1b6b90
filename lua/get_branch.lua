-- get_branch.lua: one branch with its head and chain length.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat      chat hash
-- KEYS[2] branch    branch name -> branch record
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- ARGV[3] name      the branch, or "" for the active branch
-- Reply: {name, branch record, active branch, incarnation}
-- Errors: NOT_FOUND (chat, branch), REPLACED.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'active_branch'})
  local active = fields[1] or ''
  local name, raw = ARGV[3], nil
  if name == '' then
    name = active
    _, raw = read_active_branch(KEYS[1], KEYS[2], fields[1])
  else
    _, raw = read_branch(KEYS[2], name)
  end
  return {name, raw, active, inc}
end)

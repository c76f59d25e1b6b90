-- list_branches.lua: every branch of a chat (records carry their chain length).
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat      chat hash
-- KEYS[2] branch    branch name -> branch record
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- Reply: {active branch, {name, record, ...}, incarnation} (unordered; the caller sorts by the
--        record's creation sequence)
-- Errors: NOT_FOUND (chat), REPLACED.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'active_branch'})
  return {fields[1] or '', redis.call('HGETALL', KEYS[2]), inc}
end)

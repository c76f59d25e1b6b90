-- active_stream.lua: the answer being streamed on a branch, if any.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat          chat hash
-- KEYS[2] stream_state  stream id -> record
-- ARGV[1] user          the caller, "" for anyone
-- ARGV[2] inc           the incarnation the caller knows, "" for any
-- ARGV[3] branch        the branch ("" for the chat's active branch)
-- ARGV[4] now           epoch milliseconds
-- Reply: the id of the newest live stream of the branch (its writer within its deadline), or ""
-- Errors: NOT_FOUND, REPLACED, CORRUPT.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'active_branch'})
  local branch, now = ARGV[3], tonumber(ARGV[4])
  if branch == '' then
    branch = text_field(KEYS[1], 'active_branch', fields[1])
  end
  local newest = ''
  for _, r in ipairs(stream_records(KEYS[2])) do
    if r.inc == inc and r.branch == branch and r.state == 'live' and r.deadline >= now then
      newest = r.sid
    end
  end
  return newest
end)

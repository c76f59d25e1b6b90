-- read_log.lua: the next chunk of a read split into bounded chunks.
-- KEYS[1] chat       chat hash
-- KEYS[2] log        message records in write order
-- ARGV[1] user       the caller, "" for anyone
-- ARGV[2] inc        the incarnation the first chunk was read from (required)
-- ARGV[3] budget     the most records to return
-- ARGV[4] bytes      the most record bytes to return (checked after each slice of records)
-- ARGV[5..] first, last position pairs still to read, newest first
-- Reply: {{covered ranges}, {record strings}, {ranges left}} (as read_ranges in the prelude)
-- Errors: NOT_FOUND (chat), REPLACED (the chat was deleted or re-created since the first
--         chunk), FORBIDDEN, CORRUPT (a position past the log).
-- Records never change, so a read split into chunks is as consistent as one read, as long as
-- the incarnation is the same.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  local ranges = {}
  for i = 5, #ARGV do
    ranges[#ranges + 1] = tonumber(ARGV[i])
  end
  local covered, parts, left = read_ranges(KEYS[2], ranges, tonumber(ARGV[3]), tonumber(ARGV[4]))
  return {covered, parts, left}
end)

-- get_graph.lua: the whole chat for inspection and drawing.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records in write order
-- KEYS[3] branch       branch name -> branch record
-- KEYS[4] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any
-- ARGV[3] max_messages the most messages a graph may hold (a huge chat is refused)
-- ARGV[4] inline       the most records to return in the reply; more are left to the caller's
--                      own LRANGEs (see read_ranges in lib/reads.lua)
-- Reply: {flat chat hash, flat branch hash, flat checkpoint hash, message count,
--         {covered ranges}, {LRANGE replies}, {ranges left}}
-- Errors: NOT_FOUND (chat), LIMIT (more messages than max_messages), REPLACED.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  local count = redis.call('LLEN', KEYS[2])
  if count > tonumber(ARGV[3]) then
    fail('LIMIT', {what = 'graph size', limit = tonumber(ARGV[3]), count = count})
  end
  local ranges = {}
  if count > 0 then
    ranges = {0, count - 1}
  end
  local covered, parts, left = read_ranges(KEYS[2], ranges, tonumber(ARGV[4]))
  return {
    redis.call('HGETALL', KEYS[1]),
    redis.call('HGETALL', KEYS[3]),
    redis.call('HGETALL', KEYS[4]),
    count,
    covered,
    parts,
    left,
  }
end)

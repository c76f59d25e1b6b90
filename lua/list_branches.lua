-- list_branches.lua: every branch of a chat with its chain length.
-- KEYS[1] chat      chat hash
-- KEYS[2] depth     message id -> chain length
-- KEYS[3] branch    branch name -> branch record
-- Reply: {active branch, {name, record JSON, chain length, ...}} (unordered; the caller sorts by
--        the record's creation sequence)
-- Errors: NOT_FOUND (chat), CORRUPT (an undecodable record).

return run(function()
  require_chat(KEYS[1])
  local active = redis.call('HGET', KEYS[1], 'active_branch') or ''
  local flat = redis.call('HGETALL', KEYS[3])
  local reply = {}
  for i = 1, #flat, 2 do
    local record = decode_record(KEYS[3], flat[i], flat[i + 1])
    reply[#reply + 1] = flat[i]
    reply[#reply + 1] = flat[i + 1]
    reply[#reply + 1] = depth_of(KEYS[2], record.head or '')
  end
  return {active, reply}
end)

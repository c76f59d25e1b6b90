-- compaction_lease.lua: take or give back a chat's compaction lease.
-- KEYS[1] chat       chat hash
-- ARGV[1] user       the caller, "" for anyone: another owner's chat is refused
-- ARGV[2] inc        the incarnation the caller knows, "" for any
-- ARGV[3] action     "take" or "give"
-- ARGV[4] token      the taker's random token
-- ARGV[5] now        epoch milliseconds
-- ARGV[6] ttl        how long a taken lease lasts (milliseconds)
-- ARGV[7] job        give: the compaction marker the holder's job settles without a summary
--                    ("" for none): cleared when it is still the chat's
-- Reply: take: {1, expires} when the lease is the caller's now, {0, expires} when another
--        holder's lease runs until then; give: {1, 0} when the caller's lease was given back,
--        {0, 0} when it was not the caller's (expired and taken by another, or never held).
-- Errors: NOT_FOUND, REPLACED, CORRUPT.
--
-- The lease is the field `clease` = "<token>\t<expires>" of the chat hash: one summarizer per
-- chat at a time, whether a worker or an inline compaction before an LLM call. A holder that
-- dies leaves it to expire; taking it again with the same token extends it.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2], {})
  local now, token = tonumber(ARGV[5]), ARGV[4]
  local lease = redis.call('HGET', KEYS[1], 'clease')
  local holder, expires = nil, 0
  if lease then
    holder, expires = string.match(lease, '^([^\t]*)\t(%d+)$')
    if not holder then
      corrupt(KEYS[1], 'clease', 'not a lease')
    end
    expires = tonumber(expires)
  end
  if ARGV[3] == 'take' then
    if holder and holder ~= token and expires > now then
      return {0, expires}
    end
    local until_ms = now + tonumber(ARGV[6])
    redis.call('HSET', KEYS[1], 'clease', token .. '\t' .. until_ms)
    return {1, until_ms}
  elseif ARGV[3] == 'give' then
    if ARGV[7] ~= '' and redis.call('HGET', KEYS[1], 'cjob') == ARGV[7] then
      redis.call('HDEL', KEYS[1], 'cjob')
    end
    if holder == token then
      redis.call('HDEL', KEYS[1], 'clease')
      return {1, 0}
    end
    return {0, 0}
  end
  fail('INVALID', {reason = 'unknown lease action', value = ARGV[3]})
end)

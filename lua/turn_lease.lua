-- turn_lease.lua: take, extend or give back a chat's turn lease and its fencing token.
-- KEYS[1] chat       chat hash
-- ARGV[1] user       the caller, "" for anyone: another owner's chat is refused
-- ARGV[2] inc        the incarnation the caller knows, "" for any
-- ARGV[3] action     "take", "extend" or "give"
-- ARGV[4] token      the turn's random token (a resent call carries the same one)
-- ARGV[5] now        epoch milliseconds
-- ARGV[6] ttl        take / extend: how long the lease lasts from now (milliseconds)
-- ARGV[7] interrupt  take: "1" to take the lease from a live holder (its fence goes stale)
-- Reply: {granted (0|1), fence, expires, interrupted (0|1)}
--        take: granted with the turn's fence and expiry; not granted (another turn's lease is
--        live and interrupt is "0") with that turn's fence and expiry, for the caller to wait or
--        give up. interrupted is 1 when this take cut a live lease short.
--        extend: granted with the new expiry. give: granted when the lease was the caller's.
-- Errors: NOT_FOUND, REPLACED, CORRUPT (a `turn` field ctxstore did not write),
--         CONFLICT lease_lost (extend: another turn took the chat), INVALID.
--
-- The lease is the chat hash field `turn` = "<fence>\t<holder token>\t<expires>". Every grant to
-- a new holder bumps the fence, so a turn's writes, which carry its fence (see check_fence in
-- lib/base.lua), are refused once another turn holds the chat, even if the old holder woke up
-- from a pause believing it still has time. A lease that expired and that nobody took since
-- still writes: its fence is still the newest. Giving the lease back keeps the fence (the
-- counter never goes back) and clears the holder. Taking, extending and giving with the same
-- token again has no further effect, so a resent call is safe.

return run(function()
  local chat = KEYS[1]
  open_chat(chat, ARGV[1], ARGV[2], {})
  local action, token, now = ARGV[3], ARGV[4], tonumber(ARGV[5])
  local ttl = tonumber(ARGV[6])
  if token == '' or not now or not ttl or ttl < 1 then
    fail('INVALID', {reason = 'a turn lease needs a token, the time and a positive ttl'})
  end
  local raw = redis.call('HGET', chat, 'turn')
  local fence, holder, expires = 0, '', 0
  if raw then
    local f, h, e = string.match(raw, '^(%d+)\t([^\t]*)\t(%d+)$')
    if not f then
      fail('CORRUPT', {key = chat, field = 'turn', reason = 'not a turn lease'})
    end
    fence, holder, expires = tonumber(f), h, tonumber(e)
  end
  local live = holder ~= '' and expires > now

  if action == 'take' then
    if holder == token then
      -- The caller's own lease (a resent take): extend it, same fence.
      expires = now + ttl
      redis.call('HSET', chat, 'turn', fence .. '\t' .. token .. '\t' .. expires)
      return {1, fence, expires, 0}
    end
    if live and ARGV[7] ~= '1' then
      return {0, fence, expires, 0}
    end
    fence = fence + 1
    expires = now + ttl
    redis.call('HSET', chat, 'turn', fence .. '\t' .. token .. '\t' .. expires)
    return {1, fence, expires, live and 1 or 0}
  elseif action == 'extend' then
    if holder ~= token then
      fail('CONFLICT', {reason = 'lease_lost', fence = '', current = tostring(fence)})
    end
    expires = now + ttl
    redis.call('HSET', chat, 'turn', fence .. '\t' .. token .. '\t' .. expires)
    return {1, fence, expires, 0}
  elseif action == 'give' then
    if holder ~= token then
      return {0, fence, expires, 0}
    end
    redis.call('HSET', chat, 'turn', fence .. '\t\t0')
    return {1, fence, 0, 0}
  end
  fail('INVALID', {reason = 'unknown turn lease action', value = action})
end)

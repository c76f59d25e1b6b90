-- read_index.lua: a stretch of a chat index, newest first, from a rank or after an entry.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] index     sorted set: chat id -> updated_at
-- ARGV[1] count     the most entries to return
-- ARGV[2] rank      where to start (0: the newest entry) when ARGV[3] is ""
-- ARGV[3] after     the score of the entry to continue after, "" to start at the rank
-- ARGV[4] member    the member of that entry
-- Reply: flat {member, score, ...} in index order: score descending, then member descending
--        (bytewise, as Redis orders members of equal score)
-- Continuing after an entry is keyset paging: O(log N + count) at any depth, where
-- ZRANGE ... LIMIT <offset> walks every entry before the offset. The entry continued after
-- may have moved or gone since it was read: the stretch then starts where it stood.

-- Whether a sorts before b byte by byte (Lua's own `<` follows the server's locale).
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

return run(function()
  local index, count = KEYS[1], tonumber(ARGV[1])
  if not count or count < 1 then
    fail('INVALID', {reason = 'count must be a positive number'})
  end
  if ARGV[3] == '' then
    local first = tonumber(ARGV[2])
    return redis.call('ZRANGE', index, first, first + count - 1, 'REV', 'WITHSCORES')
  end
  local after, member = tonumber(ARGV[3]), ARGV[4]
  if not after then
    fail('INVALID', {reason = 'after must be a score'})
  end
  local score = redis.call('ZSCORE', index, member)
  if score and tonumber(score) == after then
    local rank = redis.call('ZREVRANK', index, member)
    return redis.call('ZRANGE', index, rank + 1, rank + count, 'REV', 'WITHSCORES')
  end
  -- The entry moved or went: the members at exactly `after` that sort below it (a stretch of
  -- the few chats updated in the same millisecond, read in slices), then the lower scores.
  local out, read = {}, 0
  while #out < 2 * count do
    local ties = redis.call('ZRANGE', index, ARGV[3], ARGV[3], 'BYSCORE', 'REV',
                            'LIMIT', read, count, 'WITHSCORES')
    for i = 1, #ties, 2 do
      if #out < 2 * count and bytes_before(ties[i], member) then
        out[#out + 1] = ties[i]
        out[#out + 1] = ties[i + 1]
      end
    end
    read = read + #ties / 2
    if #ties < 2 * count then
      break
    end
  end
  if #out < 2 * count then
    local lower = redis.call('ZRANGE', index, '(' .. ARGV[3], '-inf', 'BYSCORE', 'REV',
                             'LIMIT', 0, count - #out / 2, 'WITHSCORES')
    for _, item in ipairs(lower) do
      out[#out + 1] = item
    end
  end
  return out
end)

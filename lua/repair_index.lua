-- repair_index.lua: fix chat-index entries found stale by a listing, only if still unchanged.
-- KEYS[1] index     sorted set: chat id -> updated_at
-- ARGV[1..] chat id, observed score, new score ("" to remove) triples
-- Reply: how many entries changed
-- An entry whose score moved since the listing read it belongs to a newer write and is kept:
-- the index lives in another slot than the chat, so a listing can only repair what it saw.

return run(function()
  local changed = 0
  for i = 1, #ARGV, 3 do
    local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
    if score and tonumber(score) == tonumber(ARGV[i + 1]) then
      if ARGV[i + 2] == '' then
        redis.call('ZREM', KEYS[1], ARGV[i])
      else
        redis.call('ZADD', KEYS[1], ARGV[i + 2], ARGV[i])
      end
      changed = changed + 1
    end
  end
  return changed
end)

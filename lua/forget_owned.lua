-- forget_owned.lua: take deleted chats out of their owner's record, unless re-created since.
-- KEYS[1] owned     the owner record: chat id -> "<recorded at (epoch ms)>\t<incarnation>"
-- ARGV[1..] chat id, incarnation pairs: each chat deleted, and the incarnation that was
-- Reply: how many entries were removed
-- An entry naming another incarnation belongs to a chat of the same id recorded after the
-- deleted one (the record lives in another slot than the chat on a Cluster, so this follows the
-- delete), and stays. An entry left behind by a crash in between is removed by the next
-- erasure or sweep.

return run(function()
  local removed = 0
  for i = 1, #ARGV, 2 do
    local entry = redis.call('HGET', KEYS[1], ARGV[i])
    if entry and string.match(entry, '\t(.*)$') == ARGV[i + 1] then
      removed = removed + redis.call('HDEL', KEYS[1], ARGV[i])
    end
  end
  return removed
end)

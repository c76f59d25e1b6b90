-- get_graph.lua: the whole chat for inspection and drawing.
-- KEYS[1] chat         chat hash
-- KEYS[2] msg          message id -> msgpack record
-- KEYS[3] parent       message id -> parent id
-- KEYS[4] depth        message id -> chain length
-- KEYS[5] branch       branch name -> branch record
-- KEYS[6] checkpoint   checkpoint name -> checkpoint record
-- ARGV[1] max_messages the most messages to return (the graph of a huge chat is refused)
-- Reply: {flat chat hash, flat parent hash, flat msg hash, flat depth hash, flat branch hash,
--         flat checkpoint hash}
-- Errors: NOT_FOUND (chat), LIMIT (more messages than max_messages).

return run(function()
  require_chat(KEYS[1])
  local count = redis.call('HLEN', KEYS[3])
  if count > tonumber(ARGV[1]) then
    fail('LIMIT', {what = 'graph size', limit = tonumber(ARGV[1]), count = count})
  end
  return {
    redis.call('HGETALL', KEYS[1]),
    redis.call('HGETALL', KEYS[3]),
    redis.call('HGETALL', KEYS[2]),
    redis.call('HGETALL', KEYS[4]),
    redis.call('HGETALL', KEYS[5]),
    redis.call('HGETALL', KEYS[6]),
  }
end)

-- export_chat.lua: what an export of a chat starts from, read at one instant.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records in write order (only its length is read)
-- KEYS[3] branch       branch name -> branch record
-- KEYS[4] checkpoint   checkpoint name -> checkpoint record
-- KEYS[5] summary      summaries by the position of the last message they cover
-- KEYS[6] tok          token entries (only its length is read)
-- ARGV[1] user         the caller, "" for anyone
-- ARGV[2] inc          the incarnation the caller knows, "" for any
-- Reply: {flat chat hash, flat branch hash, flat checkpoint hash, {summary member, position,
--         ...}, message count}
-- Errors: NOT_FOUND (chat), REPLACED, CORRUPT (token entries out of step with the
--         log).
--
-- The records themselves are read by the caller after this, with plain LRANGEs of bounded
-- size (records never change, and the caller checks the incarnation with each chunk), so no
-- command holds Redis for long whatever the chat's length. Branches, checkpoints and
-- summaries change, so they are read here, at the same instant as the log's length.

return run(function()
  open_chat(KEYS[1], ARGV[1], ARGV[2])
  local count = redis.call('LLEN', KEYS[2])
  if redis.call('STRLEN', KEYS[6]) ~= count * TOK_WIDTH then
    fail('CORRUPT', {key = KEYS[6], reason = 'token entries out of step with the log'})
  end
  return {
    redis.call('HGETALL', KEYS[1]),
    redis.call('HGETALL', KEYS[3]),
    redis.call('HGETALL', KEYS[4]),
    redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES'),
    count,
  }
end)

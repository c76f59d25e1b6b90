-- get_chain.lua: the chain of messages ending at a head, root first, read in bounded chunks.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat       chat hash
-- KEYS[2] log        message records in write order
-- KEYS[3] alias      chosen message id -> position
-- KEYS[4] runs       run starts
-- KEYS[5] branch     branch name -> branch record
-- KEYS[6] tok        token entries (see lib/README.md)
-- KEYS[7] summary    summaries by the position of the last message they cover
-- ARGV[1] user       the caller, "" for anyone: another owner's chat is refused
-- ARGV[2] inc        the incarnation the caller knows, "" for any
-- ARGV[3] mode       "head": ARGV[4] is a message id ("" for none);
--                    "branch": ARGV[4] is a branch name ("" for the active branch);
--                    "walk": ARGV[4] is a position where an earlier call's walk stopped
-- ARGV[4] start      the head message id, the branch name or the position
-- ARGV[5] max_depth  the longest chain to read
-- ARGV[6] known      a position whose chain the caller holds already (-1 for none)
-- ARGV[7] known_inc  what that chain was read from: the incarnation, and "~<rgen>" after it
--                    once the chat had a message redacted (see cache_id in lib/reads.lua)
-- ARGV[8] inline     the most records to return in the reply; a longer chain comes back as
--                    ranges, which the caller reads with LRANGE
-- ARGV[9] known_tag  the tag of the record at `known` when the caller read it
-- ARGV[10] max_tokens    a window: the newest messages within this many tokens ("" for any)
-- ARGV[11] max_messages  a window: at most this many of the newest messages ("" for any); in
--                        "walk" mode, how many messages the window still wants
-- ARGV[12] newest        "1": a chain longer than max_depth is cut to its newest max_depth
--                        messages instead of failing with LIMIT
-- ARGV[13] count_only    "1": no records, only the chain's size
-- ARGV[14] summaries     "1": the read starts after the newest summary on the chain and
--                        returns that summary; a window's max_tokens then counts it too
-- Reply: {branch name ("" unless branch mode), branch record ("" unless branch mode), active
--         branch, incarnation (with "~<rgen>" after a redaction: what the caller caches the
--         chain as), head position, chain length, base, {covered ranges},
--         {LRANGE replies}, {ranges left}, next} (see chain_reply in lib/reads.lua), then the
--         chain's tokens, the number of messages kept (the window's, else the chain length)
--         and the tokens of those messages, the summary's position (-1: none) and member ("")
--         and the tokens of the summary plus every message after it, then 1 when the chat has
--         more than one run (it may have forks: messages with versions), else 0. A read that
--         does not
--         start at the root comes with one more record, the first kept message's parent, for
--         its id.
-- Errors: NOT_FOUND (chat, branch, head message), CORRUPT, LIMIT (chain longer than max_depth),
--         REPLACED.
-- The walk reads one run record per run on the chain, then each run's records with one LRANGE
-- (or leaves long reads to the caller's own LRANGEs); what the caller already holds (immutable,
-- same incarnation) is not sent again.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'active_branch', 'rgen'})
  local cached = cache_id(inc, fields[2])
  local active = fields[1] or ''
  local name, raw_branch, head, depth = '', '', -1, 0
  if ARGV[3] == 'branch' then
    name = ARGV[4]
    if name == '' then
      name = active
    end
    local record
    if ARGV[4] == '' then
      record, raw_branch = read_active_branch(KEYS[1], KEYS[5], fields[1])
    else
      record, raw_branch = read_branch(KEYS[5], name)
    end
    -- The head's position must be in the log. A read of records checks the head's id on the
    -- client, against the last record (cheaper than reading the record here too); a read of
    -- the size alone reads no record, so it checks here.
    if ARGV[13] == '1' then
      check_message_at(KEYS[2], inc, KEYS[5], name, record.pos, record.id)
    elseif record.pos >= redis.call('LLEN', KEYS[2]) then
      corrupt(KEYS[5], name, 'names position ' .. record.pos .. ', past the log')
    end
    head, depth = record.pos, record.depth
  elseif ARGV[3] == 'walk' then
    head = tonumber(ARGV[4])
  elseif ARGV[4] ~= '' then
    head = require_position(KEYS[3], KEYS[2], inc, ARGV[4])
    depth = depth_at(KEYS[4], head)
  end
  local inline = tonumber(ARGV[8])
  local max_depth = tonumber(ARGV[5])
  local max_tokens, max_messages = tonumber(ARGV[10]), tonumber(ARGV[11])
  local limit = nil
  local chain_tokens = 0
  local summary_pos, summary_member, summary_tok, before = -1, '', 0, 0
  if ARGV[3] == 'walk' then
    inline = 0  -- the records of a walk in several calls are all read with LRANGE after it
    limit = max_messages
  else
    chain_tokens = select(2, tok_at(KEYS[6], head))
    local after = depth  -- the messages a read may return: those after the summary
    if ARGV[14] == '1' then
      local pos, member = newest_summary(KEYS[4], KEYS[7], head)
      if member then
        summary_pos, summary_member = pos, member
        summary_tok = summary_tokens(KEYS[7], member, pos)
        before = select(2, tok_at(KEYS[6], pos))
        after = depth - depth_at(KEYS[4], pos)
        limit = after
        if max_tokens then
          max_tokens = math.max(max_tokens - summary_tok, 0)
        end
        if not max_messages or max_messages > after then
          max_messages = after
        end
      end
    end
    if max_tokens or (max_messages and max_messages < depth) then
      limit = window_size(KEYS[4], KEYS[6], head, depth, max_tokens, max_messages)
    end
    if ARGV[12] == '1' and (limit or depth) > max_depth then
      limit = max_depth
    end
    if ARGV[13] == '1' then
      limit = 0
    end
  end
  local kept = limit or depth
  local kept_tokens = chain_tokens
  if limit and ARGV[3] ~= 'walk' then
    kept_tokens = 0
    if limit > 0 then
      local oldest = position_back(KEYS[4], head, limit - 1)
      kept_tokens = chain_tokens - select(2, tok_at(KEYS[6], parent_at(KEYS[4], oldest)))
    end
  end
  -- A window that does not start at the root also returns the record before it (its parent),
  -- which the caller needs for the first kept message's parent id and then drops.
  local read, read_limit = limit, max_depth
  if limit and ARGV[3] ~= 'walk' then
    if limit > max_depth then
      fail('LIMIT', {what = 'chain depth', limit = max_depth, length = limit})
    end
    if limit > 0 and limit < depth then
      read, read_limit = limit + 1, limit + 1
    end
  end
  local reply = chain_reply(KEYS[4], KEYS[2], head, depth, read_limit,
                            known_position(KEYS[2], ARGV[6], ARGV[7], ARGV[9], cached), inline,
                            read)
  reply[#reply + 1] = chain_tokens
  reply[#reply + 1] = kept
  reply[#reply + 1] = kept_tokens
  reply[#reply + 1] = summary_pos
  reply[#reply + 1] = summary_member
  reply[#reply + 1] = summary_tok + chain_tokens - before
  -- A chat of one run has no fork: every message is the only child of its parent, so no
  -- message has versions and a reader needs no second look (chain_versions.lua).
  reply[#reply + 1] = redis.call('ZCARD', KEYS[4]) > 1 and 1 or 0
  return {name, raw_branch, active, cached, unpack(reply)}
end)

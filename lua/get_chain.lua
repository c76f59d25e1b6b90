-- get_chain.lua: the chain of messages ending at a head, root first, read in bounded chunks.
-- KEYS[1] chat       chat hash
-- KEYS[2] log        message records in write order
-- KEYS[3] alias      chosen message id -> position
-- KEYS[4] runs       run starts
-- KEYS[5] branch     branch name -> branch record
-- ARGV[1] user       the caller, "" for anyone: another owner's chat is refused
-- ARGV[2] inc        the incarnation the caller knows, "" for any
-- ARGV[3] mode       "head": ARGV[4] is a message id ("" for none);
--                    "branch": ARGV[4] is a branch name ("" for the active branch);
--                    "walk": ARGV[4] is a position where an earlier call's walk stopped
-- ARGV[4] start      the head message id, the branch name or the position
-- ARGV[5] max_depth  the longest chain to read
-- ARGV[6] known      a position whose chain the caller holds already (-1 for none)
-- ARGV[7] known_inc  the incarnation that chain was read from
-- ARGV[8] inline     the most records to return in the reply; a longer chain comes back as
--                    ranges, which the caller reads with LRANGE
-- ARGV[9] known_tag  the tag of the record at `known` when the caller read it
-- Reply: {branch name ("" unless branch mode), branch record ("" unless branch mode), active
--         branch, incarnation, head position, chain length, base, {covered ranges},
--         {LRANGE replies}, {ranges left}, next} (see chain_reply in the prelude)
-- Errors: NOT_FOUND (chat, branch, head message), CORRUPT, LIMIT (chain longer than max_depth),
--         FORBIDDEN, REPLACED.
-- The walk reads one run record per run on the chain, then each run's records with one LRANGE
-- (or leaves long reads to the caller's own LRANGEs); what the caller already holds (immutable,
-- same incarnation) is not sent again.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'active_branch'})
  local active = fields[1] or ''
  local name, raw_branch, head, depth = '', '', -1, 0
  if ARGV[3] == 'branch' then
    name = ARGV[4]
    if name == '' then
      name = active
    end
    local record
    record, raw_branch = read_branch(KEYS[5], name)
    head, depth = record.pos, record.depth
  elseif ARGV[3] == 'walk' then
    head = tonumber(ARGV[4])
  elseif ARGV[4] ~= '' then
    head = require_position(KEYS[3], KEYS[2], inc, ARGV[4])
    depth = depth_at(KEYS[4], head)
  end
  local inline = tonumber(ARGV[8])
  if ARGV[3] == 'walk' then
    inline = 0  -- the records of a walk in several calls are all read with LRANGE after it
  end
  local reply = chain_reply(KEYS[4], KEYS[2], head, depth, tonumber(ARGV[5]),
                            known_position(KEYS[2], ARGV[6], ARGV[7], ARGV[9], inc), inline)
  return {name, raw_branch, active, inc, unpack(reply)}
end)

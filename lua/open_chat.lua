-- open_chat.lua: create or open a chat as its owner, and optionally read its active branch.
-- KEYS[1] chat       chat hash
-- KEYS[2] log        message records in write order
-- KEYS[3] runs       run starts
-- KEYS[4] branch     branch name -> branch record
-- KEYS[5] summary    summaries (only whether there are any is read)
-- KEYS[6] alias      the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[7] checkpoint
-- KEYS[8] tok
-- KEYS[9] reqs
-- KEYS[10] owned     optional: the owner record of ARGV[1] (servers without Cluster only): a
--                    chat this call creates is added to it in the same script
-- ARGV[1] user_id    the caller; must own an existing chat
-- ARGV[2] now        epoch milliseconds
-- ARGV[3] new_inc    the incarnation to give the chat if this call creates it
-- ARGV[4] load       "1" to return the active branch's chain too, "0" for none, "2" for the
--                    chain unless the chat has summaries (a reader that starts after the newest
--                    summary then reads with get_chain.lua)
-- ARGV[5] max_depth  the longest chain to read
-- ARGV[6] known      a position whose chain the caller holds already (-1 for none)
-- ARGV[7] known_inc  what that chain was read from (see cache_id in lib/reads.lua)
-- ARGV[8] inline     the most records to return in the reply (see get_chain.lua)
-- ARGV[9] known_tag  the tag of the record at `known` when the caller read it
-- ARGV[10] max_keys   the most metadata keys the chat may hold after the merge
-- ARGV[11] max_bytes  the most bytes of metadata (field names and values) after the merge
-- ARGV[12] ttl       the retention (milliseconds, "" for none) of a chat this call creates
-- ARGV[13] set_ttl   "1" to give an existing chat that retention too (a write: it slides)
-- ARGV[14] chat_id   the chat's id, as the owner record names it
-- ARGV[15] recorded  "1" when the caller added the chat to its owner record already (a
--                    Cluster, where the record lives in another slot), else "0"
-- ARGV[16] format   the format of a chat this call creates: FORMAT, or SEALED_FORMAT for a
--                    store with encryption (its records sealed by the client)
-- ARGV[17] seal      "" for metadata in the clear (or none); for metadata sealed by the client
--                    (a sealed chat's) the incarnation it was sealed for, which must be the
--                    chat's (ARGV[3] for a chat this call creates), else RESEAL names it
-- ARGV[18..] field, value pairs of metadata to merge ("m:<key>" -> msgpack value; sealed: a bin)
-- Reply: {-1} when the call would create the chat and neither KEYS[10] is given nor ARGV[15]
--         is "1": nothing is written; the caller records the chat in its owner record and
--         calls again (a chat's first key never exists before its owner record names it).
--         Otherwise {created (0|1), flat HGETALL of the chat hash, active branch, its record, 1 when the
--         chat has more than one run (it may have forks: messages with versions) else 0,
--         then the chain read of get_chain.lua when load is "1" (head, length, base, covered,
--         records, left, next), else nothing more}
-- Errors: TAKEN when another user owns the chat (nothing is written or read), RESEAL {layout =
--         the chat's incarnation} (sealed metadata sealed for another: checked last before any
--         write), SEALED (metadata in the clear for a sealed chat), CORRUPT (also sealed metadata
--         for a chat in the clear)
--         (checked before anything is written: a merge first checks every field the reply
--         carries), LIMIT (chain longer than max_depth, or metadata past max_keys / max_bytes
--         once merged: checked before anything is written, so a refused new chat is not
--         created).
-- This is upsert_chat, and the first call of a context engine: the owner check, the metadata
-- merge and the read of the conversation happen in one script, one round trip.

local FIRST_METADATA_ARG = 18

return run(function()
  local chat, now = KEYS[1], tonumber(ARGV[2])
  local created = 0
  local inc, fields, active, record = ARGV[3], {}, 'main', nil
  local updated_before = now
  local ttl = nil  -- the chat's retention once this call is done
  local new_ttl = ttl_argument(ARGV[12])
  local load = ARGV[4]
  if load == '2' then
    load = redis.call('ZCARD', KEYS[5]) > 0 and '0' or '1'
  end
  if ARGV[16] ~= FORMAT and ARGV[16] ~= SEALED_FORMAT then
    fail('INVALID', {reason = 'a chat is created in format ' .. FORMAT .. ' or ' .. SEALED_FORMAT})
  end
  local exists = redis.call('EXISTS', chat) == 1
  if exists then
    local holder = redis.call('HGET', chat, 'user_id')
    if holder and holder ~= ARGV[1] and is_key_id(holder) then
      -- Held by another user: this caller can neither open nor take it. (An owner that names
      -- nobody is corruption, which open_chat below reports.)
      fail('TAKEN', {what = 'chat'})
    end
    local _owner
    _owner, inc, fields = open_chat(chat, ARGV[1], '', {'updated_at', 'active_branch', 'ttl',
                                                    'rgen', 'fmt'})
    active = fields[2]
    ttl = chat_ttl(chat, fields[3])
    if inc == ARGV[3] then
      -- This call's own incarnation: a resend of the call that created the chat (its reply
      -- was lost). Answer as that call did, so the caller indexes the chat.
      created = 1
    end
    record = read_active_branch(chat, KEYS[4], active)
    if load == '1' then
      -- The head's id is checked on the client, against the chain's last record.
      if record.pos >= redis.call('LLEN', KEYS[2]) then
        corrupt(KEYS[4], active, 'names position ' .. record.pos .. ', past the log')
      end
      if record.depth > tonumber(ARGV[5]) then
        fail('LIMIT', {what = 'chain depth', limit = tonumber(ARGV[5]), length = record.depth})
      end
    end
    if #ARGV >= FIRST_METADATA_ARG then
      local merged = {}
      for i = FIRST_METADATA_ARG, #ARGV, 2 do
        merged[ARGV[i]] = true
      end
      check_chat_hash(chat, merged)
      updated_before = number_field(chat, 'updated_at', fields[1])
    end
  end
  if #ARGV >= FIRST_METADATA_ARG then
    check_sealed_call(chat, exists and fields[5] or ARGV[16], ARGV[17] ~= '')
    check_metadata_merge(chat, ARGV, FIRST_METADATA_ARG, tonumber(ARGV[10]), tonumber(ARGV[11]),
                         ARGV[17] ~= '')
    if ARGV[17] ~= '' and ARGV[17] ~= inc then
      fail('RESEAL', {layout = inc})
    end
  end
  if not exists and KEYS[10] == nil and ARGV[15] ~= '1' then
    return {-1}  -- the owner record first (see the reply above); nothing written
  end
  local wrote = #ARGV >= FIRST_METADATA_ARG
  local retained = {chat, KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]}
  if not exists or ARGV[13] == '1' then
    if new_ttl or ttl then  -- a retention to set, or one to clear
      set_retention(chat, new_ttl, retained)
    end
    ttl, wrote = new_ttl, true
  end
  if not exists then
    created = 1
    redis.call('HSET', chat, 'user_id', ARGV[1], 'fmt', ARGV[16], 'inc', inc,
               'created_at', now, 'updated_at', now, 'active_branch', 'main',
               'message_count', 0, 'branch_count', 0, 'branch_seq', 0, 'checkpoint_seq', 0)
    create_branch(chat, KEYS[4], 'main', -1, '', 0, now)
    if KEYS[10] ~= nil then
      redis.call('HSETNX', KEYS[10], ARGV[14], now .. '\t' .. inc)
    end
    record = read_branch(KEYS[4], active)
  end
  if #ARGV >= FIRST_METADATA_ARG then
    local metadata = {}
    for i = FIRST_METADATA_ARG, #ARGV do
      metadata[#metadata + 1] = ARGV[i]
    end
    in_slices('HSET', chat, metadata)
    redis.call('HSET', chat, 'updated_at', newer(updated_before, now))
  end
  if wrote then
    slide_expiry(ttl, retained)  -- again: the keys this call created have it too
  end
  local reply = {created, redis.call('HGETALL', chat), active, format_branch(record),
                 redis.call('ZCARD', KEYS[3]) > 1 and 1 or 0}
  if load == '1' then
    local known = known_position(KEYS[2], ARGV[6], ARGV[7], ARGV[9], cache_id(inc, fields[4]))
    local chain = chain_reply(KEYS[3], KEYS[2], record.pos, record.depth, tonumber(ARGV[5]),
                              known,
                              tonumber(ARGV[8]))
    for _, item in ipairs(chain) do
      reply[#reply + 1] = item
    end
  end
  return reply
end)

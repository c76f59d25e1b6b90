-- create_branch.lua: a new branch whose head is an existing message, a checkpoint's message,
-- or nothing.
-- KEYS[1] chat        chat hash
-- KEYS[2] log         message records (its length bounds positions)
-- KEYS[3] alias       chosen message id -> position
-- KEYS[4] runs        run starts (chain lengths)
-- KEYS[5] branch      branch name -> branch record
-- KEYS[6] checkpoint  checkpoint name -> checkpoint record
-- KEYS[7] reqs        the ring of recent writes' reply summaries (see lib/requests.lua)
-- KEYS[8] summary     the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[9] tok
-- ARGV[1] user        the caller, "" for anyone
-- ARGV[2] inc         the incarnation the caller knows, "" for any
--                     ("#<fence>" inside a turn)
-- ARGV[3] at          the start: a message id, a checkpoint name, or "" for an empty branch
-- ARGV[4] base        base for auto-naming (<base>-v<k+1>)
-- ARGV[5] name        explicit name, or "" to auto-name from ARGV[4]
-- ARGV[6] activate    "1" to make it the active branch
-- ARGV[7] now         epoch milliseconds
-- ARGV[8] at_kind     "message" or "checkpoint": how to read ARGV[3]
-- ARGV[9] request     the call's request id: a resent call (its reply lost) answers with the
--                     branch the first one created instead of creating another
-- ARGV[10] expected   "" for none, or "<branch>\t<head id>": create only while that branch is
--                     the active one and that message its head (a compare-and-set: taking the
--                     newest message off the active branch, as a framework's pop does, is then
--                     one atomic step; "" as the head id: an empty branch)
-- Reply: {name, branch record, active branch, incarnation}; a resent call's:
--        {that reply, 'resent'}
-- Errors: NOT_FOUND (chat, message, checkpoint), CONFLICT (explicit name taken; head: the
--         active branch is not the expected one, or its head moved),
--         REPLACED, CORRUPT (a checkpoint that does not name the message at its position, a
--         counter or field that is malformed: checked before anything is written).
-- Auto-naming runs inside the script, so two workers forking at once get distinct names;
-- restoring a checkpoint reads it in the same script, so it cannot move in between.

return run(function()
  local _, inc, fields, fence = open_chat(KEYS[1], ARGV[1], ARGV[2],
                                         {'req_slot', 'active_branch', 'ttl'}, true)
  local slot = request_slot(KEYS[1], fields[1])
  local ttl = chat_ttl(KEYS[1], fields[3])
  local active = text_field(KEYS[1], 'active_branch', fields[2])
  local prior = recall_request(KEYS[7], request_argument(ARGV[9]))
  if prior then
    return {{prior, redis.call('HGET', KEYS[5], prior) or '', active, inc}, 'resent'}
  end
  check_fence(KEYS[1], fence)
  if ARGV[10] ~= '' then
    local branch_name, head = string.match(ARGV[10], '^([^\t]+)\t([^\t]*)$')
    if not branch_name then
      fail('INVALID', {reason = 'malformed expected branch and head'})
    end
    local current = read_branch(KEYS[5], active).id
    if active ~= branch_name or current ~= head then
      fail('CONFLICT', {reason = 'head', branch = active, expected = head, current = current})
    end
  end
  local pos, id = -1, ''
  if ARGV[8] == 'checkpoint' then
    local raw = redis.call('HGET', KEYS[6], ARGV[3])
    if not raw then
      fail('NOT_FOUND', {what = 'checkpoint', id = ARGV[3]})
    end
    local checkpoint = parse_checkpoint(KEYS[6], ARGV[3], raw)
    pos, id = checkpoint.pos, checkpoint.id
    check_message_at(KEYS[2], inc, KEYS[6], ARGV[3], pos, id)
  elseif ARGV[3] ~= '' then
    pos, id = require_position(KEYS[3], KEYS[2], inc, ARGV[3]), ARGV[3]
  end
  local name = ARGV[5]
  if name == '' then
    name = branch_namer(KEYS[5])(ARGV[4])
  elseif redis.call('HEXISTS', KEYS[5], name) == 1 then
    fail('CONFLICT', {reason = 'branch_exists', branch = name})
  end
  local depth = depth_at(KEYS[4], pos)
  check_branch_counters(KEYS[1])
  local raw = create_branch(KEYS[1], KEYS[5], name, pos, id, depth, tonumber(ARGV[7]))
  local chat_fields = remember_request(KEYS[7], ARGV[9], name, slot)
  if ARGV[6] == '1' then
    chat_fields[#chat_fields + 1] = 'active_branch'
    chat_fields[#chat_fields + 1] = name
    active = name
  end
  if #chat_fields > 0 then
    redis.call('HSET', KEYS[1], unpack(chat_fields))
  end
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return {name, raw, active, inc}
end)

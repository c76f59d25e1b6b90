-- append.lua: add messages to a branch in order and move its head, as one compare-and-set.
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records in write order
-- KEYS[3] alias        chosen message id -> position
-- KEYS[4] runs         run starts (see the prelude)
-- KEYS[5] branch       branch name -> branch record
-- KEYS[6] req          request id -> reply summary (this generation)
-- KEYS[7] req_old      request id -> reply summary (the previous generation)
-- KEYS[8] all_chats    optional: the namespace's chat index (servers without Cluster only)
-- KEYS[9] user_chats   optional: the owner's chat index (with KEYS[8])
-- ARGV[1] call       the call's fields, tab-separated (one argument: each argument costs the
--                    client and Redis time on the hottest path):
--                    user (the caller, "" for anyone: another owner's chat is refused),
--                    inc (the incarnation the caller knows, "" for any), branch (to write to),
--                    expected (the head id the caller last saw, "" for an empty branch),
--                    on_conflict (raise | rebase | fork: when the head is not `expected`),
--                    on_existing (raise | fork: for a message id the chat already holds),
--                    now (epoch milliseconds), request (request id, "" for none: a resent call
--                    is answered from its summary), chat_id and index_owner (the chat's id and
--                    the owner the index keys KEYS[8..9] were built for; "" without them)
-- ARGV[2] chosen     the messages' chosen ids, tab-separated ("" in a slot: generate one)
-- ARGV[3..] bodies   one per message, oldest first: the msgpack of created_at followed by the
--                    msgpack of the payload
-- Reply: {branch, head id, {stored ids}, rebased (0|1), conflict_fork ("" or the new branch),
--         {branches created}, updated_at, owner, indexed (0|1)}
-- Errors: NOT_FOUND (chat, branch, the expected head when forking), CONFLICT (head moved and
--         on_conflict=raise; message id exists and on_existing=raise), INVALID (duplicate or
--         reserved ids), FORBIDDEN, REPLACED.
--
-- on_conflict: raise reports the current head; rebase chains onto the current head; fork writes
-- onto a new auto-named branch that starts at `expected` (not activated: the other writer's branch
-- stays the chat's active one).
-- on_existing=fork is the edit rule: a message whose id exists starts a new branch at that
-- message's parent (auto-named after the branch being written, activated) and is stored there
-- under a generated id; the messages after it follow it there. Nothing is ever overwritten.
-- A resent call (same request id, after its reply was lost) is answered like the first time.
-- The index entries move inside the script, so they move only when the write succeeded; on a
-- Cluster they live in other slots and the caller sends them after the reply.

local FIRST_BODY_ARG = 3

-- The chosen id of each message ("" for a generated one): ARGV[2] split at tabs.
local function chosen_ids(count)
  local chosen = {}
  for id in string.gmatch(ARGV[2] .. '\t', '([^\t]*)\t') do
    chosen[#chosen + 1] = id
  end
  if #chosen ~= count then
    fail('INVALID', {reason = 'one chosen id slot per message', ids = #chosen, messages = count})
  end
  return chosen
end

local function stored_ids(alias, inc, chosen_list, first, count)
  local ids = {}
  for i = 1, count do
    local pos = first + i - 1
    local chosen = chosen_list[i]
    if chosen ~= '' and redis.call('HGET', alias, chosen) == tostring(pos) then
      ids[i] = chosen
    else
      ids[i] = derived_id(pos, inc)
    end
  end
  return ids
end

local function index(chat_id, index_owner, owner, updated_at)
  if KEYS[8] == nil or index_owner ~= owner then
    return 0
  end
  redis.call('ZADD', KEYS[8], 'GT', updated_at, chat_id)
  redis.call('ZADD', KEYS[9], 'GT', updated_at, chat_id)
  return 1
end

return run(function()
  local chat, log, alias, runs, branch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local req, req_old = KEYS[6], KEYS[7]
  local user, known_inc, target, expected, on_conflict, on_existing, now, request, chat_id,
        index_owner = string.match(ARGV[1],
          '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(%d+)\t([^\t]*)\t' ..
          '([^\t]*)\t([^\t]*)$')
  if not user then
    fail('INVALID', {reason = 'malformed call fields'})
  end
  now = tonumber(now)
  local chosen_list = chosen_ids(#ARGV - FIRST_BODY_ARG + 1)

  local owner, inc, fields = open_chat(chat, user, known_inc,
                                       {'updated_at', 'message_count', 'req_since'})
  local record = read_branch(branch, target)
  local record_name = target
  -- A resend of a call that succeeded finds the head moved on (its own messages), or wrote
  -- under chosen ids (an edit leaves the head where it was): only then can it be one.
  if record.id ~= expected or string.find(ARGV[2], '[^\t]') then
    local prior = recall_request(req, req_old, request)
    if prior then
      local name, first, count, rebased, fork, created =
        string.match(prior, '^([^\t]*)\t(%d+)\t(%d+)\t(%d)\t([^\t]*)\t(.*)$')
      local ids = stored_ids(alias, inc, chosen_list, tonumber(first), tonumber(count))
      local created_list = {}
      for item in string.gmatch(created, '[^\n]+') do
        created_list[#created_list + 1] = item
      end
      local updated_at = tonumber(fields[1])
      return {name, ids[#ids], ids, tonumber(rebased), fork, created_list, updated_at, owner,
              index(chat_id, index_owner, owner, updated_at)}
    end
  end
  local message_count = number_field(chat, 'message_count', fields[2])
  local length = redis.call('LLEN', log)
  local namer = nil
  local function name_branch(base)
    namer = namer or branch_namer(branch)
    return namer(base)
  end

  -- Phase 1: decide everything and validate; no writes.
  local cursor, cursor_id, cursor_depth = record.pos, record.id, record.depth
  local rebased = 0
  local conflict_fork = ''
  local new_branches = {}
  if record.id ~= expected then
    if on_conflict == 'raise' then
      fail('CONFLICT', {reason = 'head', branch = target, expected = expected, current = record.id})
    elseif on_conflict == 'rebase' then
      rebased = 1
    elseif on_conflict == 'fork' then
      cursor, cursor_id = -1, ''
      if expected ~= '' then
        cursor, cursor_id = require_position(alias, inc, length, expected), expected
      end
      cursor_depth = depth_at(runs, cursor)
      conflict_fork = name_branch(target)
      new_branches[#new_branches + 1] = {name = conflict_fork, activate = false}
      target = conflict_fork
    else
      fail('INVALID', {reason = 'unknown on_conflict', value = on_conflict})
    end
  end

  local records, new_runs, aliases, ids = {}, {}, {}, {}
  local heads = {}
  local seen = {}
  local pos = length - 1
  for i = FIRST_BODY_ARG, #ARGV do
    local chosen, body = chosen_list[i - FIRST_BODY_ARG + 1], ARGV[i]
    local keep_chosen = false
    if chosen ~= '' then
      if seen[chosen] then
        fail('INVALID', {reason = 'duplicate message id in one append', id = chosen})
      end
      seen[chosen] = true
      local existing, reserved = position_of(alias, inc, length, chosen)
      if existing then
        if on_existing ~= 'fork' then
          fail('CONFLICT', {reason = 'message_exists', id = chosen})
        end
        local fork = name_branch(target)
        new_branches[#new_branches + 1] = {name = fork, activate = true}
        target = fork
        cursor = parent_at(runs, existing)
        cursor_depth = depth_at(runs, existing) - 1
      elseif reserved then
        fail('INVALID', {reason = 'a generated id of this chat cannot be chosen', id = chosen})
      else
        keep_chosen = true
      end
    end
    pos = pos + 1
    local id = derived_id(pos, inc)
    local tail = '\192'
    if keep_chosen then
      id = chosen
      tail = pack_str(chosen)
      aliases[#aliases + 1] = chosen
      aliases[#aliases + 1] = pos
    end
    cursor_depth = cursor_depth + 1
    if cursor < 0 or cursor ~= pos - 1 then
      new_runs[#new_runs + 1] = pos
      new_runs[#new_runs + 1] = pos .. ':' .. cursor .. ':' .. cursor_depth
    end
    records[#records + 1] = '\148' .. pack_int(cursor) .. body .. tail
    ids[#ids + 1] = id
    cursor, cursor_id = pos, id
    heads[target] = {pos = pos, id = id, depth = cursor_depth}
  end
  local count = #records

  -- Phase 2: write.
  local created, created_names = {}, {}
  for _, fork in ipairs(new_branches) do
    create_branch(chat, branch, fork.name, -1, '', 0, now)
    created_names[#created_names + 1] = fork.name
    if fork.activate then
      redis.call('HSET', chat, 'active_branch', fork.name)
    end
    created[fork.name] = true
  end
  if count == 1 then
    redis.call('RPUSH', log, records[1])
  else
    in_slices('RPUSH', log, records)
  end
  if #aliases > 0 then
    in_slices('HSET', alias, aliases)
  end
  if #new_runs > 0 then
    in_slices('ZADD', runs, new_runs)
  end
  for name, head in pairs(heads) do
    local current = record
    if created[name] or name ~= record_name then
      current = read_branch(branch, name)
    end
    current.pos, current.id, current.depth = head.pos, head.id, head.depth
    redis.call('HSET', branch, name, format_branch(current))
  end
  local updated_at = newer(fields[1], now)
  redis.call('HSET', chat, 'message_count', message_count + count, 'updated_at', updated_at)
  remember_request(chat, req, req_old, request,
                   target .. '\t' .. length .. '\t' .. count .. '\t' .. rebased .. '\t' ..
                   conflict_fork .. '\t' .. table.concat(created_names, '\n'),
                   fields[3], now)
  return {target, cursor_id, ids, rebased, conflict_fork, created_names, updated_at, owner,
          index(chat_id, index_owner, owner, updated_at)}
end)

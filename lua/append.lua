-- append.lua: add messages to a branch in order and move its head, as one compare-and-set.
-- KEYS[1] chat         chat hash
-- KEYS[2] msg          message id -> msgpack record
-- KEYS[3] parent       message id -> parent id ("" for a root)
-- KEYS[4] depth        message id -> chain length
-- KEYS[5] branch       branch name -> branch record
-- ARGV[1] branch       the branch to write to
-- ARGV[2] expected     the head the caller last saw ("" for an empty branch)
-- ARGV[3] on_conflict  raise | rebase | fork: what to do when the head is not `expected`
-- ARGV[4] on_existing  raise | fork: what to do with a message id the chat already holds
-- ARGV[5] now          epoch milliseconds
-- ARGV[6..] id, spare_id, record triples, oldest first (spare_id: "" or the id to store the
--           message under when on_existing=fork replaces an existing one)
-- Reply: {branch, head, {stored ids}, rebased (0|1), conflict_fork ("" or the new branch),
--         {branches created}, updated_at, owner}
-- Errors: NOT_FOUND (chat, branch, the expected head when forking), CONFLICT (head moved and
--         on_conflict=raise; message id exists and on_existing=raise), INVALID (duplicate ids).
--
-- on_conflict: raise reports the current head; rebase chains onto the current head; fork writes
-- onto a new auto-named branch that starts at `expected` (not activated: the other writer's branch
-- stays the chat's active one).
-- on_existing=fork is the edit rule: a message whose id exists starts a new branch at that
-- message's parent (auto-named after the branch being written, activated) and is stored there
-- under its spare id; the messages after it follow it there. Nothing is ever overwritten.
-- A replay (the same call sent again after its reply was lost) finds every message already
-- stored, byte for byte, in order: it is answered like the first time and writes nothing.

return run(function()
  local chat, msg, parent, depth, branch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local target, expected = ARGV[1], ARGV[2]
  local on_conflict, on_existing = ARGV[3], ARGV[4]
  local now = tonumber(ARGV[5])

  local owner = require_chat(chat)
  local record = read_branch(branch, target)
  local stored_before = replayed_append(msg, parent, 6)
  if stored_before then
    local last = stored_before[#stored_before]
    return {branch_with_head(branch, last, target), last, stored_before, 0, '', {},
            tonumber(redis.call('HGET', chat, 'updated_at')), owner}
  end
  local namer = nil
  local function name_branch(base)
    namer = namer or branch_namer(branch)
    return namer(base)
  end

  -- Phase 1: decide everything and validate; no writes.
  local cursor = record.head
  local rebased = 0
  local conflict_fork = ''
  local new_branches = {}
  if record.head ~= expected then
    if on_conflict == 'raise' then
      fail('CONFLICT', {reason = 'head', branch = target, expected = expected, current = record.head})
    elseif on_conflict == 'rebase' then
      rebased = 1
    elseif on_conflict == 'fork' then
      if expected ~= '' then
        require_message(parent, expected)
      end
      conflict_fork = name_branch(target)
      new_branches[#new_branches + 1] = {name = conflict_fork, at = expected, activate = false}
      target = conflict_fork
      cursor = expected
    else
      fail('INVALID', {reason = 'unknown on_conflict', value = on_conflict})
    end
  end

  local cursor_depth = depth_of(depth, cursor)
  local heads = {}
  local writes = {}
  local seen = {}
  for i = 6, #ARGV, 3 do
    local id, spare = ARGV[i], ARGV[i + 1]
    if seen[id] then
      fail('INVALID', {reason = 'duplicate message id in one append', id = id})
    end
    seen[id] = true
    if redis.call('HEXISTS', parent, id) == 1 then
      if on_existing ~= 'fork' then
        fail('CONFLICT', {reason = 'message_exists', id = id})
      end
      if spare == '' or seen[spare] or redis.call('HEXISTS', parent, spare) == 1 then
        fail('INVALID', {reason = 'no usable spare id for an edited message', id = id})
      end
      seen[spare] = true
      local at = redis.call('HGET', parent, id)
      local fork = name_branch(target)
      new_branches[#new_branches + 1] = {name = fork, at = at, activate = true}
      target = fork
      cursor = at
      cursor_depth = depth_of(depth, at)
      id = spare
    end
    cursor_depth = cursor_depth + 1
    writes[#writes + 1] = {id = id, parent = cursor, depth = cursor_depth, record = ARGV[i + 2]}
    cursor = id
    heads[target] = id
  end

  -- Phase 2: write.
  local created = {}
  for _, fork in ipairs(new_branches) do
    create_branch(chat, branch, fork.name, fork.at, now)
    created[#created + 1] = fork.name
    if fork.activate then
      redis.call('HSET', chat, 'active_branch', fork.name)
    end
  end
  for _, w in ipairs(writes) do
    redis.call('HSET', msg, w.id, w.record)
    redis.call('HSET', parent, w.id, w.parent)
    redis.call('HSET', depth, w.id, w.depth)
  end
  for name, head in pairs(heads) do
    local current = read_branch(branch, name)
    current.head = head
    write_branch(branch, name, current)
  end
  local stored = {}
  for i, w in ipairs(writes) do
    stored[i] = w.id
  end
  redis.call('HINCRBY', chat, 'message_count', #writes)
  local updated_at = touch(chat, now)
  return {target, cursor, stored, rebased, conflict_fork, created, updated_at, owner}
end)

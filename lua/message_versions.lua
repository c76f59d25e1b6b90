-- message_versions.lua: the messages that share a message's parent (its versions: what a chat
-- UI shows as "< 2/3 >"), across branches, with the branches whose chain holds each.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat      chat hash
-- KEYS[2] log       message records in write order
-- KEYS[3] alias     chosen message id -> position
-- KEYS[4] runs      run starts (see lib/README.md)
-- KEYS[5] branch    branch name -> branch record
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- ARGV[3] id        the message id
-- Reply: {incarnation, parent position (-1 for a root), parent record ("" for a root),
--         {{position, record, {branch names}}...}}: the versions oldest first (by position:
--         the order they were written), each with the branches whose chain holds it, oldest
--         branch first (by creation).
-- Errors: NOT_FOUND (chat, message), CORRUPT (a record or run missing), REPLACED.
-- Each branch is walked back at most MAX_RUNS_PER_CALL runs (one per fork on its chain): a
-- branch that forked more often than that above the parent is not listed as a holder.
-- The children of the parent P are the run starts whose parent is P and, when P+1 starts no
-- run, P+1 (the child written right after it). A branch's chain holds at most one of them (they
-- share a parent), found by walking the chain's runs from its head down to P.

return run(function()
  local chat, log, alias, runs, branch_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local _, inc = open_chat(chat, ARGV[1], ARGV[2])
  local pos = require_position(alias, log, inc, ARGV[3])
  local parent = parent_at(runs, pos)
  local length = redis.call('LLEN', log)
  local starts, children = run_starts(runs)
  local order = children_of(starts, children, parent, length)
  local siblings = {}
  for _, at in ipairs(order) do
    siblings[at] = {}
  end
  local next_pos = parent + 1
  local flat = redis.call('HGETALL', branch_key)
  for i = 1, #flat, 2 do
    local name = flat[i]
    local record = parse_branch(branch_key, name, flat[i + 1])
    local head = record.pos
    local p, hops = head, 0
    while p > parent and hops < MAX_RUNS_PER_CALL do
      hops = hops + 1
      local start, from = run_of(runs, p)
      local found = nil
      if siblings[start] and from == parent then
        found = start
      elseif start <= parent and siblings[next_pos] and next_pos <= p then
        found = next_pos
      end
      if found then
        local holders = siblings[found]
        holders[#holders + 1] = {tonumber(record.seq), name}
        break
      end
      p = from
    end
  end
  local reply = {}
  for _, at in ipairs(order) do
    local record = redis.call('LINDEX', log, at)
    if not record then
      fail('CORRUPT', {key = log, field = tostring(at), reason = 'message without a record'})
    end
    local holders = siblings[at]
    table.sort(holders, function(a, b) return a[1] < b[1] end)
    local names = {}
    for j, holder in ipairs(holders) do
      names[j] = holder[2]
    end
    reply[#reply + 1] = {at, record, names}
  end
  local parent_record = ''
  if parent >= 0 then
    parent_record = redis.call('LINDEX', log, parent)
    if not parent_record then
      fail('CORRUPT', {key = log, field = tostring(parent), reason = 'message without a record'})
    end
  end
  return {inc, parent, parent_record, reply}
end)

-- chain_versions.lua: where a branch's chain passes a message that has versions (siblings:
-- messages that share its parent, as edits and regenerated answers make), with its rank among
-- them: what a chat UI shows as "< 2/3 >" beside each such message.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat      chat hash
-- KEYS[2] log       message records in write order
-- KEYS[3] runs      run starts (see lib/README.md)
-- KEYS[4] branch    branch name -> branch record
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any
-- ARGV[3] branch    the branch ("" for the chat's active one)
-- Reply: {incarnation, {{position, record, index (0-based, oldest first), count}...}}: each
--        message of the chain whose parent has more than one child.
-- Errors: NOT_FOUND (chat, branch), CORRUPT (a run or record missing), REPLACED.
-- The children of a position P are the runs that start with parent P and, when P+1 starts no
-- run, P+1; the chain is walked from its head, run by run, at most MAX_RUNS_PER_CALL runs (a
-- chain of more runs shows no versions further back). Its cost grows with the chat's runs
-- (one ZRANGE) and forks, not with its messages.

return run(function()
  local chat, log, runs, branch_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local _, inc, fields = open_chat(chat, ARGV[1], ARGV[2], {'active_branch'})
  local target = ARGV[3]
  if target == '' then
    target = text_field(chat, 'active_branch', fields[1])
  end
  local head = read_branch(branch_key, target).pos
  if head < 0 then
    return {inc, {}}
  end
  local length = redis.call('LLEN', log)
  local starts, children = run_starts(runs)
  -- The children of each position with more than one, oldest first.
  local forks = {}
  for parent in pairs(children) do
    local list = children_of(starts, children, parent, length)
    if #list > 1 then
      forks[parent] = list
    end
  end
  local fork_points = {}
  for parent in pairs(forks) do
    fork_points[#fork_points + 1] = parent
  end
  local found = {}
  local function note(position, parent)
    local list = forks[parent]
    if not list then
      return
    end
    for index, child in ipairs(list) do
      if child == position then
        local record = redis.call('LINDEX', log, position)
        if not record then
          fail('CORRUPT', {key = log, field = tostring(position), reason = 'message without a record'})
        end
        found[#found + 1] = {position, record, index - 1, #list}
        return
      end
    end
  end
  local p, hops = head, 0
  while p >= 0 and hops < MAX_RUNS_PER_CALL do
    hops = hops + 1
    local start, parent = run_of(runs, p)
    -- inside the run each position continues the one before it: a fork point P in
    -- [start, p - 1] gives the chain's P + 1 its versions
    for _, fork in ipairs(fork_points) do
      if fork >= start and fork < p then
        note(fork + 1, fork)
      end
    end
    note(start, parent)
    p = parent
  end
  return {inc, found}
end)

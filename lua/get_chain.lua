-- get_chain.lua: the chain of messages ending at a head, root first, in one walk.
-- KEYS[1] chat       chat hash
-- KEYS[2] msg        message id -> msgpack record
-- KEYS[3] parent     message id -> parent id
-- KEYS[4] branch     branch name -> branch record
-- ARGV[1] mode       "head": ARGV[2] is a message id ("" for none);
--                    "branch": ARGV[2] is a branch name ("" for the active branch)
-- ARGV[2] start      the head message id or the branch name
-- ARGV[3] max_depth  the longest chain to walk
-- Reply: {branch name ("" in head mode), branch record JSON ("" in head mode),
--         active branch, {ids root first}, {records in the same order}}
-- Errors: NOT_FOUND (chat, branch, head message), CORRUPT (cycle, dangling parent, missing
--         record), LIMIT (chain longer than max_depth).
-- Walking parent pointers first and fetching the records with one HMGET keeps the script short:
-- Redis serves nobody else while it runs.

return run(function()
  require_chat(KEYS[1])
  local active = redis.call('HGET', KEYS[1], 'active_branch') or ''
  local name, raw_branch, head = '', '', ARGV[2]
  if ARGV[1] == 'branch' then
    name = ARGV[2]
    if name == '' then
      name = active
    end
    local record
    record, raw_branch = read_branch(KEYS[4], name)
    head = record.head
  end
  local ids, records = read_chain(KEYS[3], KEYS[2], head, tonumber(ARGV[3]))
  return {name, raw_branch, active, ids, records}
end)

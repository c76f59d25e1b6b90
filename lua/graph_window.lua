-- graph_window.lua: a window of a chat's graph for drawing: every message whose depth lies
-- within `radius` of a chosen message's, on at most `max_lanes` runs, with the pointers and
-- summaries that touch it. Reads only what it returns: the records of the window's segments
-- (one LRANGE each), never the rest of a long chat.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] chat        chat hash
-- KEYS[2] log         message records in write order
-- KEYS[3] alias       chosen message id -> position
-- KEYS[4] runs        run starts (chain lengths)
-- KEYS[5] branch      branch name -> branch record
-- KEYS[6] checkpoint  checkpoint name -> checkpoint record
-- KEYS[7] summary     summaries by the position of the last message each covers
-- ARGV[1] user        the caller, "" for anyone
-- ARGV[2] inc         the incarnation the caller knows, "" for any
-- ARGV[3] center      the message the window is drawn around; "" for the active branch's head
-- ARGV[4] radius      depths drawn on each side of the center's (1..500)
-- ARGV[5] max_lanes   the most runs drawn (1..64); the runs of the center's and the active
--                     branch's chains come first, then the others in write order
-- ARGV[6] max_marks   the most branches, checkpoints and summaries returned (each)
-- Reply: {flat chat hash, center position (-1: an empty chat), lowest depth, highest depth,
--         {segments: first position, last position, parent of first, depth of first, ...},
--         {LRANGE replies, one per segment}, lanes left out, deepest depth of the chat's runs,
--         {branch name, raw record, ...} (heads in a segment, and the active branch),
--         {checkpoint name, raw record, ...} (messages in a segment),
--         {summary member, position, {covered: first, last, ...}, ...},
--         {active chain within the window: first, last, ...}}
-- Errors: NOT_FOUND (chat, message), INVALID (radius, lanes), REPLACED, CORRUPT.

return run(function()
  local _, inc, fields = open_chat(KEYS[1], ARGV[1], ARGV[2], {'active_branch'})
  local radius, lanes, marks = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  if not radius or radius < 1 or radius > 500 or radius % 1 ~= 0 then
    fail('INVALID', {reason = 'radius must be an integer from 1 to 500'})
  end
  if not lanes or lanes < 1 or lanes > 64 or lanes % 1 ~= 0 then
    fail('INVALID', {reason = 'max_lanes must be an integer from 1 to 64'})
  end
  if not marks or marks < 1 or marks % 1 ~= 0 then
    fail('INVALID', {reason = 'max_marks must be a positive integer'})
  end
  local active = text_field(KEYS[1], 'active_branch', fields[1])
  local active_record = read_active_branch(KEYS[1], KEYS[5], active)
  local center = active_record.pos
  if ARGV[3] ~= '' then
    center = require_position(KEYS[3], KEYS[2], inc, ARGV[3])
  end
  local chat = redis.call('HGETALL', KEYS[1])
  if center < 0 then
    return {chat, -1, 0, 0, {}, {}, 0, 0, {}, {}, {}, {}}
  end
  local depth = depth_at(KEYS[4], center)
  local low, high = math.max(1, depth - radius), depth + radius

  -- Every run, with its last position (the next run's start, or the log's end, minus one).
  local length = redis.call('LLEN', KEYS[2])
  local flat = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
  local runs, deepest = {}, 0
  for i = 1, #flat, 2 do
    local start, parent, first_depth = parse_run(KEYS[4], flat[i], flat[i + 1])
    runs[#runs + 1] = {start = start, parent = parent, depth = first_depth}
  end
  for i, r in ipairs(runs) do
    r.last = (runs[i + 1] and runs[i + 1].start or length) - 1
    deepest = math.max(deepest, r.depth + r.last - r.start)
  end

  -- The chains drawn first: the center's and the active branch's (positions within the window).
  local function chain_in_window(head)
    if head < 0 then
      return {}
    end
    local head_depth = depth_at(KEYS[4], head)
    if head_depth < low then
      return {}
    end
    return (walk_ranges(KEYS[4], head, -1, head_depth - low + 1))
  end
  local active_chain = chain_in_window(active_record.pos)
  local preferred = {}
  for _, ranges in ipairs({chain_in_window(center), active_chain}) do
    for i = 1, #ranges, 2 do
      preferred[ranges[i]] = true  -- a range's first position lies in the run it starts
    end
  end

  -- Each run's stretch within [low, high]; preferred runs first, then write order.
  local chosen, others = {}, {}
  for _, r in ipairs(runs) do
    local first = r.start + math.max(0, low - r.depth)
    local last = math.min(r.last, r.start + (high - r.depth))
    if first <= last then
      local seg = {first = first, last = last, run = r}
      local is_preferred = false
      for p in pairs(preferred) do
        if p >= r.start and p <= r.last then
          is_preferred = true
        end
      end
      if is_preferred then
        chosen[#chosen + 1] = seg
      else
        others[#others + 1] = seg
      end
    end
  end
  local left_out = 0
  for _, seg in ipairs(others) do
    if #chosen < lanes then
      chosen[#chosen + 1] = seg
    else
      left_out = left_out + 1
    end
  end
  while #chosen > lanes do
    table.remove(chosen)
    left_out = left_out + 1
  end
  table.sort(chosen, function(a, b) return a.first < b.first end)

  local segments, parts = {}, {}
  local function drawn(p)
    for _, seg in ipairs(chosen) do
      if p >= seg.first and p <= seg.last then
        return true
      end
    end
    return false
  end
  for _, seg in ipairs(chosen) do
    local parent = seg.first - 1
    if seg.first == seg.run.start then
      parent = seg.run.parent
    end
    segments[#segments + 1] = seg.first
    segments[#segments + 1] = seg.last
    segments[#segments + 1] = parent
    segments[#segments + 1] = seg.run.depth + seg.first - seg.run.start
    local records = redis.call('LRANGE', KEYS[2], seg.first, seg.last)
    if #records ~= seg.last - seg.first + 1 then
      fail('CORRUPT', {key = KEYS[2], field = tostring(seg.last), reason = 'a position past the log'})
    end
    parts[#parts + 1] = records
  end

  local branches, count = {}, 0
  local branch_flat = redis.call('HGETALL', KEYS[5])
  for i = 1, #branch_flat, 2 do
    local name, raw = branch_flat[i], branch_flat[i + 1]
    local b = parse_branch(KEYS[5], name, raw)
    if name == active or (count < marks and b.pos >= 0 and drawn(b.pos)) then
      if name ~= active then
        count = count + 1
      end
      branches[#branches + 1] = name
      branches[#branches + 1] = raw
    end
  end
  local checkpoints = {}
  count = 0
  local checkpoint_flat = redis.call('HGETALL', KEYS[6])
  for i = 1, #checkpoint_flat, 2 do
    local c = parse_checkpoint(KEYS[6], checkpoint_flat[i], checkpoint_flat[i + 1])
    if count < marks and drawn(c.pos) then
      count = count + 1
      checkpoints[#checkpoints + 1] = checkpoint_flat[i]
      checkpoints[#checkpoints + 1] = checkpoint_flat[i + 1]
    end
  end
  -- Summaries whose chain reaches into the window: each covers its chain from the root through
  -- its position; the newest first, at most max_marks of them.
  local summaries = {}
  local found = redis.call('ZREVRANGEBYSCORE', KEYS[7], '+inf', '-inf', 'WITHSCORES', 'LIMIT', 0,
                           200)  -- the newest 200 (ZREVRANGEBYSCORE: the tenants' ACL has it)
  for i = 1, #found, 2 do
    if #summaries >= 3 * marks then
      break
    end
    local pos = tonumber(found[i + 1])
    local covered = chain_in_window(pos)
    local clipped = {}
    for j = 1, #covered, 2 do
      local first, last = covered[j], math.min(covered[j + 1], pos)
      for _, seg in ipairs(chosen) do
        local a, b = math.max(first, seg.first), math.min(last, seg.last)
        if a <= b then
          clipped[#clipped + 1] = a
          clipped[#clipped + 1] = b
        end
      end
    end
    if #clipped > 0 then
      summaries[#summaries + 1] = found[i]
      summaries[#summaries + 1] = pos
      summaries[#summaries + 1] = clipped
    end
  end
  return {chat, center, low, high, segments, parts, left_out, deepest, branches, checkpoints,
          summaries, active_chain}
end)

-- redact_message.lua: replace one message's record by its redacted form, the one change the
-- immutable graph allows, with everything that followed from its text, in one step.
-- KEYS[1] chat          chat hash
-- KEYS[2] log           message records in write order
-- KEYS[3] runs          run starts (which positions descend from the message)
-- KEYS[4] tok           token entries (the chain totals after the message move)
-- KEYS[5] summary       summaries (those written from the message's text are dropped)
-- KEYS[6] stream        the entries of the chat's answer streams
-- KEYS[7] stream_state  stream id -> record (the stream that carried the message, if any)
-- KEYS[8] jobs          optional: the compaction job stream of this chat's shard (servers
--                       without Cluster; elsewhere the caller adds the job after the reply)
-- KEYS[9] trimmed       optional: that stream's count of jobs trimmed untaken (with KEYS[8])
-- ARGV[1] user          the caller, "" for anyone (another owner's chat is NOT_FOUND)
-- ARGV[2] inc           the incarnation the caller knows, "" for any ("#<fence>" in a turn)
-- ARGV[3] position      the message's log position (the caller read it with get_message)
-- ARGV[4] read          the record the caller read and redacted, as it read it
-- ARGV[5] record        the redacted record: the same parent, time, chosen id and tag
-- ARGV[6] tokens        the redacted message's own tokens
-- ARGV[7] message_id    the message's id (what a finished answer stream's record names)
-- ARGV[8] title         the marker a title made from the message takes ("" to keep titles)
-- ARGV[9] user_message  "1" when the message is a user message (a title is made from the
--                       first question of a chain), else "0"
-- ARGV[10] static_title the title the message's text would give a chat
-- ARGV[11] now          epoch milliseconds
-- ARGV[12] chat_id      the chat's id, for the compaction job
-- ARGV[13] keep         the newest messages the compaction job keeps verbatim
-- ARGV[14] seen_title   "" for a chat in the clear; for a sealed chat (whose title the script
--                       cannot read) "=" then the title as the caller read it ("=" for none):
--                       the caller decided from it, ARGV[8] is then the sealed marker ("" when
--                       the title is the marker already) and ARGV[10] "1" when the title is
--                       the one the message's text gives, else "0"; a title changed since is
--                       CONFLICT changed
-- Reply: {redacted (1, or 0 when the record is the redacted one already: nothing written),
--         summaries dropped, answer-stream entries removed, the message's tokens before,
--         positions whose chain totals moved, title replaced (0|1), the compaction marker set
--         ("" for none), 1 when the script enqueued the job itself, the chat's active branch
--         (the job's)}
-- Errors: NOT_FOUND (chat, message), REPLACED, CONFLICT changed (the record is not the one the
--         caller read: read again), CONFLICT lease_lost, INVALID (a record that is not the
--         redacted form of the stored one), CORRUPT (anything read that is malformed).
--
-- Every branch sees the change at once: a message is one record whatever the branches through
-- it. The token entries of every position descending from the message (on any branch) move by
-- the difference; every summary at such a position covered the message (a summary covers the
-- chain through its position) and was written from its text, so it is dropped and, when any
-- was, a compaction job is enqueued. The chat's `rgen` (redaction generation) moves, so a chain
-- another process cached before is read again in full, never served from its copy.

-- A title is taken to be made from the first question of a chain: a user message this close to
-- the root (after a system or developer message and a greeting, at most).
local TITLE_DEPTH = 4

-- The runs, oldest first: starts and parents.
local function all_runs(runs_key)
  local flat = redis.call('ZRANGE', runs_key, 0, -1, 'WITHSCORES')
  local starts, parents = {}, {}
  for i = 1, #flat, 2 do
    local start, parent = parse_run(runs_key, flat[i], flat[i + 1])
    starts[#starts + 1], parents[#parents + 1] = start, parent
  end
  return starts, parents
end

-- The index of the run holding position p (the last start at or before p).
local function run_index(starts, p)
  local lo, hi = 1, #starts
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if starts[mid] <= p then
      lo = mid
    else
      hi = mid - 1
    end
  end
  return lo
end

-- from[k]: the first position of run k whose chain holds position pos (nil: none of them).
-- A run descends from pos when its parent does: runs come oldest first, and a parent is
-- always older than its child, so one pass decides them all.
local function descending_runs(starts, parents, pos)
  local from = {}
  local first = run_index(starts, pos)
  from[first] = pos
  for k = first + 1, #starts do
    local parent = parents[k]
    if parent >= pos then
      local j = run_index(starts, parent)
      if from[j] and parent >= from[j] then
        from[k] = starts[k]
      end
    end
  end
  return from, first
end

-- `count` token entries (TOK_WIDTH bytes each: flags, then a 40-bit big-endian total) with
-- `delta` added to every total: the inner loop of a redaction near the root of a long chat, so
-- it is written out (one string.byte and one string.char an entry, no table per entry).
local function shifted_entries(s, count, delta)
  local byte, char = string.byte, string.char
  local out = {}
  for i = 0, count - 1 do
    local o = i * TOK_WIDTH
    local f, a, b, c, d, e = byte(s, o + 1, o + TOK_WIDTH)
    local total = (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e + delta
    local e2 = total % 256
    total = (total - e2) / 256
    local d2 = total % 256
    total = (total - d2) / 256
    local c2 = total % 256
    total = (total - c2) / 256
    local b2 = total % 256
    out[i + 1] = char(f, (total - b2) / 256, b2, c2, d2, e2)
  end
  return table.concat(out)
end

-- Whether the record is a msgpack array of 5 or 6 values and nothing more.
local function is_record(s)
  local kind, at, count = mp_head(s, 1)
  if kind ~= 'array' or (count ~= 5 and count ~= 6) then
    return false
  end
  for _ = 1, count do
    at = at and mp_skip(s, at)
  end
  return at == #s + 1
end

-- The bytes of a record's parent and created_at (after its array header).
local function record_head(s)
  local after = mp_skip(s, 2)
  after = after and mp_skip(s, after)
  return after and string.sub(s, 2, after - 1)
end

return run(function()
  local chat, log, runs, tok = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local summary_key, stream, stream_state = KEYS[5], KEYS[6], KEYS[7]
  local _owner, _inc, fields = open_chat(chat, ARGV[1], ARGV[2], {'title', 'active_branch'})
  local pos, new_tokens, now = tonumber(ARGV[3]), tonumber(ARGV[6]), tonumber(ARGV[11])
  local stored = pos and redis.call('LINDEX', log, pos)
  if not stored then
    fail('NOT_FOUND', {what = 'message', id = ARGV[7]})
  end
  local redacted = ARGV[5]
  if stored == redacted then
    return {0, 0, 0, 0, 0, 0, '', 0, ''}
  end
  if stored ~= ARGV[4] then
    fail('CONFLICT', {reason = 'changed', id = ARGV[7]})
  end
  if not is_record(redacted) or record_head(redacted) ~= record_head(stored)
      or string.sub(redacted, -TAG_LENGTH - 1) ~= string.sub(stored, -TAG_LENGTH - 1) then
    fail('INVALID', {reason = 'not the redacted form of the stored record', id = ARGV[7]})
  end
  -- Everything read and checked before the first write.
  local starts, parents = all_runs(runs)
  local from, first = descending_runs(starts, parents, pos)
  local start_of_run, parent_of_run = starts[first], parents[first]
  local parent = pos > start_of_run and pos - 1 or parent_of_run
  local _, before = tok_at(tok, parent)
  local _flags, through = tok_at(tok, pos)
  local old_tokens = through - before
  if old_tokens < 0 then
    corrupt(tok, tostring(pos), 'a chain total below its parent\'s')
  end
  local delta = new_tokens - old_tokens
  local last = redis.call('LLEN', log) - 1
  local ranges = {}
  for k = 1, #starts do
    if from[k] then
      local run_end = (starts[k + 1] or last + 1) - 1
      ranges[#ranges + 1] = {from[k], run_end}
    end
  end
  local flat = redis.call('ZRANGE', summary_key, 0, -1, 'WITHSCORES')
  local dropped = {}
  for i = 1, #flat, 2 do
    local at = tonumber(flat[i + 1])
    local k = run_index(starts, at)
    if from[k] and at >= from[k] then
      dropped[#dropped + 1] = flat[i]
    end
  end
  local answers = {}
  for _, r in ipairs(stream_records(stream_state)) do
    if r.state == 'done' and r.detail == ARGV[7] then
      answers[r.sid] = true
    end
  end
  local pieces = {}
  if next(answers) then
    for _, entry in ipairs(redis.call('XRANGE', stream, '-', '+')) do
      local values = entry[2]
      for i = 1, #values, 2 do
        if values[i] == 's' and answers[values[i + 1]] then
          pieces[#pieces + 1] = entry[1]
          break
        end
      end
    end
  end
  local title = fields[1]
  local sealed_title = ARGV[14] ~= ''
  if sealed_title and (title or '') ~= string.sub(ARGV[14], 2) then
    fail('CONFLICT', {reason = 'changed', id = ARGV[7]})
  end
  local made_from = sealed_title and ARGV[10] == '1' or (not sealed_title and title == ARGV[10])
  local retitle = ARGV[8] ~= '' and title and (sealed_title or title ~= ARGV[8])
    and ((ARGV[9] == '1' and depth_at(runs, pos) <= TITLE_DEPTH) or made_from)
  local active = text_field(chat, 'active_branch', fields[2])

  -- The writes.
  redis.call('LSET', log, pos, redacted)
  local moved = 0
  if delta ~= 0 then
    for _, range in ipairs(ranges) do
      local a, b = range[1], range[2]
      local s = redis.call('GETRANGE', tok, a * TOK_WIDTH, (b + 1) * TOK_WIDTH - 1)
      if #s ~= (b - a + 1) * TOK_WIDTH then
        corrupt(tok, tostring(a), 'positions without tokens')
      end
      redis.call('SETRANGE', tok, a * TOK_WIDTH, shifted_entries(s, b - a + 1, delta))
      moved = moved + b - a + 1
    end
  end
  if #dropped > 0 then
    in_slices('ZREM', summary_key, dropped)
  end
  if #pieces > 0 then
    in_slices('XDEL', stream, pieces)
  end
  if retitle then
    redis.call('HSET', chat, 'title', ARGV[8])
  end
  local job, enqueued = '', 0
  if #dropped > 0 then
    job = '-1\t' .. now
    redis.call('HSET', chat, 'cjob', job)
    if KEYS[8] then
      enqueue_job(KEYS[8], KEYS[9], {'chat', ARGV[12], 'branch', active, 'job', job,
                                     'soft', '', 'keep', ARGV[13]})
      enqueued = 1
    end
  end
  redis.call('HINCRBY', chat, 'rgen', 1)
  return {1, #dropped, #pieces, old_tokens, moved, retitle and 1 or 0, job, enqueued, active}
end)

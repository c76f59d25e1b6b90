-- append.lua: add messages to a branch in order and move its head, as one compare-and-set.
-- KEYS[1] chat         chat hash
-- KEYS[2] log          message records in write order
-- KEYS[3] alias        chosen message id -> position
-- KEYS[4] runs         run starts (see lib/README.md)
-- KEYS[5] branch       branch name -> branch record
-- KEYS[6] reqs         the ring of recent writes' reply summaries (see lib/requests.lua)
-- KEYS[7] tok          token entries (see lib/README.md)
-- KEYS[8] summary      summaries (read for the context size when a compaction threshold is set)
-- KEYS[9] checkpoint   not read: its expiry slides with the chat's (see slide_expiry)
-- KEYS[10] all_chats   optional: the namespace's chat index (servers without Cluster only)
-- KEYS[11] user_chats  optional: the owner's chat index (with KEYS[10])
-- KEYS[12] jobs        optional: the compaction job stream of this chat's shard (with KEYS[10])
-- KEYS[13] trimmed     optional: that stream's count of jobs trimmed untaken (with KEYS[12])
-- ARGV[1] call       the call's fields, tab-separated, in this order (read by name: see
--                    lua/lib/README.md; a shape in backticks is the field's Lua pattern):
--   call.user          the caller, "" for anyone (another owner's chat is refused)
--   call.inc           the incarnation the caller knows, "" for any; "#<fence>" after it
--                      inside a turn (see lib/base.lua)
--   call.branch        the branch to write to; "" for the chat's active one, read here
--   call.expected      the head id the caller last saw, "" for an empty branch
--   call.on_conflict   raise | rebase | fork: when the head is not `expected`
--   call.on_existing   raise | fork: for a message id the chat already holds
--   call.now `%d+`     epoch milliseconds
--   call.request       the request id ("" for none): a resent call is answered from its summary
--                      (see lib/requests.lua), the first write's reply
--   call.chat_id       the chat's id, for the index entries ("" without KEYS[10..11])
--   call.index_owner   the owner the index keys KEYS[10..11] were built for ("" without them)
--   call.soft_tokens `%d*` a compaction threshold ("" for none)
--   call.job_ttl `%d*` ms after which a compaction job that settled nothing may be enqueued again
--   call.keep `%d*`    the messages a compaction keeps verbatim (carried by the job)
--   call.base `%d+`    the chain tokens the client assumed before the first message
--   call.digest `[%w_%-]*` a digest of the messages (chosen ids, payloads, metadata): a call under
--                      a request id already used whose digest differs is refused
--   call.recall `1?`   "1": look the request id up whatever the head (a caller's own request
--                      id, which a retry may send after anything); "": only when the call
--                      could be a resend (the head moved on, or chosen ids)
--   call.trace `[%x%-]*` the caller's W3C traceparent ("" for none): carried by the compaction
--                      job this append enqueues, so the worker's span joins the save's trace
--   call.seal `[%w:=%-]*` "" for records in the clear (a chat of FORMAT); for sealed records (a
--                      chat of SEALED_FORMAT) the place the client sealed them for, the layout
--                      "<inc>:<first position>:<parent of the first>" then ":<i>=<parent>" for
--                      each later message i (1-based) whose parent is not the position before
--                      it. A layout other than the one this call would write fails RESEAL with
--                      the right one, before any write: the client seals for it and calls again.
-- ARGV[2] chosen     the messages' chosen ids, tab-separated ("" in a slot: generate one)
-- ARGV[3] tokens     TOK_WIDTH bytes per message: its flags and the chain's tokens through it,
--                    computed by the client as if the chain before the first message held
--                    `base` tokens (a call field). When it does (the client knew the head's
--                    size, the usual case), the entries are stored as they are; otherwise the
--                    script shifts each by the difference.
-- ARGV[4] title      a title the chat takes if it has none ("" for none): a chat UI's first
--                    save titles the chat in the same call (sealed records: the title sealed
--                    for the same incarnation)
-- ARGV[5..] records  one per message, oldest first, built by the client as if each message were
--                    the child of the one before it in the log (parent -2) and kept its chosen
--                    id; the script rewrites the few that are not (the first of a new run, an
--                    edit). Each ends with its 6-character tag.
--                    Or packed, for a long append (a managed service takes at most 3,999
--                    arguments a command): ARGV[5] "" (never a record), ARGV[6] the records'
--                    byte lengths, comma-separated, ARGV[7] the records end to end.
-- Reply: a list of these, in this order:
--   reply.branch          where the last message went
--   reply.first           the first log position this call used
--   reply.edits           {indexes (1-based) of messages stored under a generated id although
--                         they came with a chosen id: edits}
--   reply.rebased         1 when the call chained onto a head it did not expect, else 0
--   reply.conflict_fork   "" or the branch a conflict fork wrote to
--   reply.created         {branches created}
--   reply.updated_at      the chat's updated_at after the call
--   reply.owner           the chat's owner
--   reply.indexed         1 when the script moved the index entries itself, else 0
--   reply.incarnation     the chat's incarnation
--   reply.context_tokens  the branch from its newest summary on, after this append (-1 when
--                         not computed)
--   reply.job             the compaction marker this call set ("" for none)
--   reply.enqueued        1 when the script added the job to KEYS[12] itself, else 0
--   reply.head_tokens     the chain tokens through the new head (-1 for a resent call)
--   reply.resent          1 when the call was answered from the request ring (a resend of a
--                         write applied before: nothing written now), else 0
-- Compaction: with soft_tokens, an append that leaves the branch its last message lands on
-- (chosen ids, edits and conflict forks alike) with a context (newest summary plus the messages
-- after it) at or past soft_tokens sets the chat's `cjob` marker "<summary position>\t<now>",
-- unless one is set and younger than job_ttl: one pending job per chat, decided atomically
-- here. write_summary clears it.
-- Errors: RESEAL {layout} (sealed records sealed for another place: see call.seal), SEALED (records
--         in the clear for a sealed chat), NOT_FOUND (chat, branch, the expected head when
--         forking), CONFLICT (head moved and
--         on_conflict=raise; message id exists and on_existing=raise; lease_lost: the turn's
--         fencing token is stale; request_reused: the request id was used by a write of other
--         messages), INVALID (duplicate or reserved ids), REPLACED,
--         CORRUPT (anything read that is malformed, a head that is not the message its branch
--         record names, sealed records for a chat in the clear: checked before any write).
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
-- The client computes the stored ids from the first position, the tags and the edits, so a
-- long append costs Redis little more than its RPUSH.

local FIRST_RECORD_ARG = 5

-- Splits s at tabs into exactly `count` fields.
local function tab_fields(s, count, what)
  local out = {}
  for item in string.gmatch(s .. '\t', '([^\t]*)\t') do
    out[#out + 1] = item
  end
  if #out ~= count then
    fail('INVALID', {reason = 'one ' .. what .. ' per message', got = #out, messages = count})
  end
  return out
end

-- The records of a packed call: `blob` cut at the comma-separated byte `lengths` (each a
-- positive decimal without leading zeros: the form is checked once, the sum at the end, so a
-- call whose lengths do not add up fails before any write).
local function unpacked(lengths, blob)
  if string.find(lengths, '[^%d,]') or string.find(lengths, ',,') or string.find(lengths, '^,')
      or string.find(lengths, ',$') or string.find(lengths, '^0') or string.find(lengths, ',0')
      or lengths == '' then
    fail('INVALID', {reason = 'packed record lengths'})
  end
  local out, count, at = {}, 0, 1
  local sub = string.sub
  for size in string.gmatch(lengths, '%d+') do
    local after = at + tonumber(size)
    count = count + 1
    out[count] = sub(blob, at, after - 1)
    at = after
  end
  if at ~= #blob + 1 then
    fail('INVALID', {reason = 'packed records and their lengths differ', bytes = #blob,
                     lengths = at - 1})
  end
  return out
end

local function index(chat_id, index_owner, owner, updated_at)
  if KEYS[10] == nil or index_owner ~= owner then
    return 0
  end
  redis.call('ZADD', KEYS[10], 'GT', updated_at, chat_id)
  redis.call('ZADD', KEYS[11], 'GT', updated_at, chat_id)
  return 1
end

-- A client-built record with its parent set to `parent` (the client wrote -2 right after the
-- array header, which is kept: 5 elements, or 6 with the message's metadata before the chosen
-- id) and, for an edit, its chosen id dropped.
local function rewritten(record, parent, drop_chosen, chosen)
  local body = string.sub(record, 3)
  if drop_chosen then
    local tail = pack_str(chosen) .. string.sub(record, -(TAG_LENGTH + 1))
    body = string.sub(body, 1, #body - #tail) .. '\192' .. string.sub(record, -(TAG_LENGTH + 1))
  end
  return string.sub(record, 1, 1) .. pack_int(parent) .. body
end

return run(function()
  local chat, log, alias, runs, branch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local reqs, tok, summary_key = KEYS[6], KEYS[7], KEYS[8]
  local call = call_fields(ARGV[1])
  local user, known_inc, target, expected, on_conflict = call.user, call.inc, call.branch,
    call.expected, call.on_conflict
  local on_existing, now, request, chat_id, index_owner = call.on_existing, call.now,
    call.request, call.chat_id, call.index_owner
  local soft_tokens, job_ttl, keep, token_base, digest = call.soft_tokens, call.job_ttl,
    call.keep, call.base, call.digest
  local recall, trace, seal = call.recall, call.trace, call.seal
  now = tonumber(now)
  -- The records: ARGV[first_record..last_record], or the table cut from a packed call.
  local given, first_record, last_record = ARGV, FIRST_RECORD_ARG, #ARGV
  if ARGV[FIRST_RECORD_ARG] == '' then
    if #ARGV ~= FIRST_RECORD_ARG + 2 then
      fail('INVALID', {reason = 'a packed call has lengths and records only', got = #ARGV})
    end
    given = unpacked(ARGV[FIRST_RECORD_ARG + 1], ARGV[FIRST_RECORD_ARG + 2])
    first_record, last_record = 1, #given
  end
  local count = last_record - first_record + 1
  local any_chosen = string.find(ARGV[2], '[^\t]') ~= nil

  local owner, inc, fields, fence = open_chat(chat, user, known_inc,
                                              {'updated_at', 'message_count', 'req_slot', 'cjob',
                                               'ttl', 'active_branch', 'title', 'fmt'}, true)
  if target == '' then
    target = text_field(chat, 'active_branch', fields[6])
  end
  local record = read_branch(branch, target)
  local record_name = target
  local updated_before = number_field(chat, 'updated_at', fields[1])
  local slot = request_slot(chat, fields[3])
  request = request_argument(request)
  check_message_at(log, inc, branch, target, record.pos, record.id)
  -- A resend of a call that succeeded finds the head moved on (its own messages), or wrote
  -- under chosen ids (an edit leaves the head where it was): only then can it be one, unless
  -- the caller chose the request id (a retry of its own, which may come after anything).
  if record.id ~= expected or any_chosen or recall == '1' then
    local prior = recall_request(reqs, request)
    if prior then
      local reply = recalled_append(reqs, request, prior, digest, updated_before)
      reply.owner, reply.incarnation = owner, inc
      reply.indexed = index(chat_id, index_owner, owner, reply.updated_at)
      return reply_of(reply)
    end
  end
  check_fence(chat, fence)
  local sealed = fields[8] == SEALED_FORMAT
  check_sealed_call(chat, fields[8], seal ~= '')
  -- The place each record lands: its parent, for the layout a sealed call must match.
  local layout = {}
  local ttl = chat_ttl(chat, fields[5])
  local message_count = number_field(chat, 'message_count', fields[2])
  local length = redis.call('LLEN', log)
  if #ARGV[3] ~= count * TOK_WIDTH then
    fail('INVALID', {reason = 'one token entry per message', got = #ARGV[3], messages = count})
  end
  if redis.call('STRLEN', tok) ~= length * TOK_WIDTH then
    fail('CORRUPT', {key = tok, reason = 'token entries out of step with the log'})
  end
  local entries = {}
  local base = tonumber(token_base)
  -- The chain tokens through message i (1-based), after `before` chain tokens: its own
  -- tokens are the difference between its entry and the one before it (or `base`).
  local function entry(i, before)
    local flags, through = tok_decode(ARGV[3], (i - 1) * TOK_WIDTH)
    local previous = base
    if i > 1 then
      previous = select(2, tok_decode(ARGV[3], (i - 2) * TOK_WIDTH))
    end
    if through < previous then
      fail('INVALID', {reason = 'token entries must not decrease', message = i})
    end
    local total = before + through - previous
    if total > MAX_CHAIN_TOKENS then
      fail('INVALID', {reason = 'a chain of more than 2^40 tokens'})
    end
    entries[i] = tok_encode(flags, total)
    return total
  end
  local namer = nil
  local function name_branch(base)
    namer = namer or branch_namer(branch)
    return namer(base)
  end

  -- Phase 1: decide everything and validate; no writes.
  local cursor, cursor_id, cursor_depth = record.pos, record.id, record.depth
  local cursor_tokens = -1  -- read when first needed: chain tokens through the cursor
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
        cursor, cursor_id = require_position(alias, log, inc, expected), expected
      end
      cursor_depth = depth_at(runs, cursor)
      cursor_tokens = -1
      conflict_fork = name_branch(target)
      new_branches[#new_branches + 1] = {name = conflict_fork, activate = false, pos = cursor,
                                         id = cursor_id, depth = cursor_depth}
      target = conflict_fork
    else
      fail('INVALID', {reason = 'unknown on_conflict', value = on_conflict})
    end
  end

  local context_tokens, job, head_tokens = -1, '', -1
  -- The context (newest summary plus the messages after it) once the records whose chain
  -- passes through `base` end at `head_total` tokens, and the marker to set when that reaches
  -- soft_tokens and no younger job is pending.
  local function compaction_due(base, head_total)
    local spos, member = newest_summary(runs, summary_key, base)
    local context = head_total
    if member then
      context = head_total - select(2, tok_at(tok, spos)) +
                summary_tokens(summary_key, member, spos)
    end
    if context < tonumber(soft_tokens) then
      return context, ''
    end
    local pending_since = nil
    if fields[4] then
      pending_since = tonumber(string.match(fields[4], '^%-?%d+\t(%d+)$') or '')
      if not pending_since then
        corrupt(chat, 'cjob', 'not a compaction marker')
      end
    end
    if pending_since and now - pending_since < (tonumber(job_ttl) or 0) then
      return context, ''
    end
    return context, spos .. '\t' .. now
  end
  local records, new_runs, aliases, edits = {}, {}, {}, {}
  local heads = {}
  local first = length
  -- Without chosen ids (the usual case) only the first record can need a new parent: the rest
  -- go from ARGV to RPUSH untouched, so a long append costs Redis little more than the RPUSH.
  local passthrough = not any_chosen
  if passthrough then
    local head_record = given[first_record]
    layout[1] = cursor
    if cursor < 0 or cursor ~= first - 1 then
      new_runs = {first, first .. ':' .. cursor .. ':' .. (cursor_depth + 1)}
      head_record = rewritten(head_record, cursor, false, '')
    end
    records[1] = head_record
    local total = select(2, tok_at(tok, cursor))
    local before_append = cursor
    if total == base then
      -- The client knew the size of the chain it appends to: its entries are the stored ones.
      total = select(2, tok_decode(ARGV[3], (count - 1) * TOK_WIDTH))
      if total > MAX_CHAIN_TOKENS or select(2, tok_decode(ARGV[3], 0)) < base then
        fail('INVALID', {reason = 'token entries out of range'})
      end
      entries = nil
    else
      for i = 1, count do
        total = entry(i, total)
      end
    end
    head_tokens = total
    if soft_tokens ~= '' then
      context_tokens, job = compaction_due(before_append, total)
    end
    cursor = first + count - 1
    cursor_depth = cursor_depth + count
    local newest = given[last_record]
    if count == 1 then
      newest = head_record
    end
    cursor_id = derived_id(cursor, inc, string.sub(newest, -TAG_LENGTH))
    heads[target] = {pos = cursor, id = cursor_id, depth = cursor_depth}
  end
  local chosen_list = {}
  if any_chosen then
    chosen_list = tab_fields(ARGV[2], count, 'chosen id slot')
  end
  local seen = {}
  local pos = length - 1
  local last_tag = ''
  -- The existing message the last run of new records descends from: where the chain of the
  -- branch they land on leaves the stored log (its newest summary is at or before it).
  local chain_base = cursor
  for i = 1, passthrough and 0 or count do
    local item = given[first_record + i - 1]
    local chosen = chosen_list[i]
    local edit = false
    if chosen ~= '' then
      if seen[chosen] then
        fail('INVALID', {reason = 'duplicate message id in one append', id = chosen})
      end
      seen[chosen] = true
      local existing, reserved = position_of(alias, log, inc, chosen)
      if existing then
        if on_existing ~= 'fork' then
          fail('CONFLICT', {reason = 'message_exists', id = chosen})
        end
        edit = true
        edits[#edits + 1] = i
        local fork = name_branch(target)
        cursor = parent_at(runs, existing)
        chain_base = cursor
        cursor_depth = depth_at(runs, existing) - 1
        cursor_tokens = -1
        new_branches[#new_branches + 1] = {name = fork, activate = true, pos = cursor, id = '',
                                           depth = cursor_depth}
        target = fork
      elseif reserved then
        fail('INVALID', {reason = 'a generated id of this chat cannot be chosen', id = chosen})
      else
        aliases[#aliases + 1] = chosen
        aliases[#aliases + 1] = pos + 1
      end
    end
    pos = pos + 1
    cursor_depth = cursor_depth + 1
    if cursor_tokens < 0 then
      cursor_tokens = select(2, tok_at(tok, cursor))
    end
    cursor_tokens = entry(i, cursor_tokens)
    head_tokens = cursor_tokens
    if i == 1 then
      layout[1] = cursor
    elseif cursor ~= pos - 1 then
      layout[#layout + 1] = i .. '=' .. cursor
    end
    if cursor < 0 or cursor ~= pos - 1 then
      new_runs[#new_runs + 1] = pos
      new_runs[#new_runs + 1] = pos .. ':' .. cursor .. ':' .. cursor_depth
      item = rewritten(item, cursor, edit, chosen)
    elseif edit then
      item = rewritten(item, -2, true, chosen)
    end
    records[i] = item
    last_tag = string.sub(item, -TAG_LENGTH)
    if chosen ~= '' and not edit then
      cursor_id = chosen
    else
      cursor_id = derived_id(pos, inc, last_tag)
    end
    cursor = pos
    heads[target] = {pos = pos, id = cursor_id, depth = cursor_depth}
  end

  if not passthrough and soft_tokens ~= '' then
    context_tokens, job = compaction_due(chain_base, head_tokens)
  end
  if #new_branches > 0 then
    check_branch_counters(chat)
  end
  if sealed then
    local landing = inc .. ':' .. first .. ':' .. table.concat(layout, ':')
    if landing ~= seal then
      fail('RESEAL', {layout = landing})
    end
  end

  -- Phase 2: write.
  local created_names = {}
  for _, fork in ipairs(new_branches) do
    create_branch(chat, branch, fork.name, fork.pos, fork.id, fork.depth, now)
    created_names[#created_names + 1] = fork.name
    if fork.activate then
      redis.call('HSET', chat, 'active_branch', fork.name)
    end
  end
  redis.call('APPEND', tok, entries and table.concat(entries) or ARGV[3])
  if passthrough then
    redis.call('RPUSH', log, records[1])
    for from = first_record + 1, last_record, 1000 do
      redis.call('RPUSH', log, unpack(given, from, math.min(from + 999, last_record)))
    end
  else
    in_slices('RPUSH', log, records)
  end
  if #aliases > 0 then
    in_slices('HSET', alias, aliases)
  end
  if #new_runs > 0 then
    in_slices('ZADD', runs, new_runs)
  end
  -- Each branch that received messages moves to its last one; a fork that received none (a
  -- conflict fork whose first message is an edit) keeps its start.
  for name, head in pairs(heads) do
    local current = record
    if name ~= record_name then
      current = read_branch(branch, name)
    end
    current.pos, current.id, current.depth = head.pos, head.id, head.depth
    redis.call('HSET', branch, name, format_branch(current))
  end
  local updated_at = newer(updated_before, now)
  local enqueued = 0
  if job ~= '' and KEYS[12] ~= nil then
    enqueued = 1
  end
  local remembered = remember_request(reqs, request,
                                      target .. '\t' .. first .. '\t' .. rebased .. '\t' ..
                                      conflict_fork .. '\t' .. table.concat(created_names, '\n') ..
                                      '\t' .. table.concat(edits, ',') .. '\t' .. digest ..
                                      '\t' .. updated_at .. '\t' .. context_tokens .. '\t' ..
                                      string.gsub(job, '\t', ':') .. '\t' .. enqueued, slot)
  redis.call('HSET', chat, 'message_count', message_count + count, 'updated_at', updated_at,
             unpack(remembered))
  if ARGV[4] ~= '' and not fields[7] then
    redis.call('HSET', chat, 'title', ARGV[4])
  end
  if job ~= '' then
    redis.call('HSET', chat, 'cjob', job)
    if enqueued == 1 then
      local job_fields = {'chat', chat_id, 'branch', target, 'job', job,
                          'soft', soft_tokens, 'keep', keep}
      if trace ~= '' then
        job_fields[#job_fields + 1] = 'trace'
        job_fields[#job_fields + 1] = trace
      end
      enqueue_job(KEYS[12], KEYS[13], job_fields)
    end
  end
  slide_expiry(ttl, {chat, log, alias, runs, branch, KEYS[9], tok, summary_key, reqs})
  return reply_of({branch = target, first = first, edits = edits, rebased = rebased,
                   conflict_fork = conflict_fork, created = created_names,
                   updated_at = updated_at, owner = owner,
                   indexed = index(chat_id, index_owner, owner, updated_at), incarnation = inc,
                   context_tokens = context_tokens, job = job, enqueued = enqueued,
                   head_tokens = head_tokens, resent = 0})
end)

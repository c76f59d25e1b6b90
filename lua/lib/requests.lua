-- requests.lua: resend detection. A write with a request id leaves a summary of its reply in
-- the chat's reqs hash; a resent call finds it there and replies the same without writing
-- twice. The hash is a ring of REQUEST_RING slots ("0".."31" -> "<request id>\t<summary>"),
-- filled in turn from the chat's `req_slot` field, so it holds the chat's last 32 such writes:
-- its memory is bounded per chat whatever the rate, and it shares the chat's expiry and
-- deletion like every other key of the chat.
-- Relies on: base, checks.

-- How many recent writes a chat remembers. redis-py resends a call within milliseconds of
-- losing its reply; 32 other writes to the same chat in between is far past any real chat.
local REQUEST_RING = 32
-- Request ids are what ctxstore sends (16 URL-safe base64 characters) or a caller's own.
local MAX_REQUEST_BYTES = 64

-- The request id of a call, checked ("" for none): a tab or a newline would make the summary
-- it leaves unreadable.
local function request_argument(raw)
  if #raw > MAX_REQUEST_BYTES or not string.find(raw, '^[%w_%-]*$') then
    fail('INVALID', {reason = 'a request id is up to 64 letters, digits, "-" or "_"'})
  end
  return raw
end

-- The slot the chat's next remembered write takes, from its `req_slot` field (read with the
-- chat's other fields), checked before the script's first write.
local function request_slot(chat_key, raw)
  local slot = number_field(chat_key, 'req_slot', raw, 0)
  if slot >= REQUEST_RING then
    corrupt(chat_key, 'req_slot', 'not a slot of the request ring')
  end
  return slot
end

-- The summary a write with this request id left, or nil. Only a call that could be a resend
-- asks (append tells from its head or ids; the other writes always ask), and a writer whose
-- head moved (many writers on one chat) asks on every save, so the lookup is one HVALS and a
-- plain prefix search per slot. The slot it relies on is checked; the others are not read
-- further (they are checked when a resend finds them).
local function recall_request(reqs_key, request)
  if request == '' then
    return nil
  end
  local prefix = request .. '\t'
  for _, entry in ipairs(redis.call('HVALS', reqs_key)) do
    if string.find(entry, prefix, 1, true) == 1 then
      local summary = string.sub(entry, #prefix + 1)
      if not is_utf8(summary) then
        corrupt(reqs_key, request, 'not a request summary')
      end
      return summary
    end
  end
  return nil
end

-- Remembers a write's summary in the ring; returns the chat fields the write sets with its
-- own HSET of the chat hash (the next slot), or none for a call without a request id.
local function remember_request(reqs_key, request, summary, slot)
  if request == '' then
    return {}
  end
  redis.call('HSET', reqs_key, slot, request .. '\t' .. summary)
  return {'req_slot', (slot + 1) % REQUEST_RING}
end

-- remember_request for a write that sets nothing else in the chat hash: the next slot is set
-- here.
local function remember_in_chat(chat_key, reqs_key, request, summary, slot)
  local fields = remember_request(reqs_key, request, summary, slot)
  if #fields > 0 then
    redis.call('HSET', chat_key, unpack(fields))
  end
end

-- The reply of append.lua to a call whose request id the ring remembers (`prior`, its summary):
-- the first write's reply, as it was, without writing, by name (reply_of). The owner,
-- incarnation and index entries are the caller's to fill; the head's tokens are -1 (not known
-- here). A summary
-- with a digest of other messages than this call's (`digest`) is a request id used twice:
-- refused. A summary of an earlier release (6 fields, no digest, no first reply's figures)
-- answers with the chat's updated_at (`updated_before`) and no context size.
local function recalled_append(reqs_key, request, prior, digest, updated_before)
  if not is_utf8(prior) then
    corrupt(reqs_key, request, 'not the summary of an append')
  end
  local name, first, rebased, fork, created, edits, prior_digest, updated_at, context, job,
        enqueued = string.match(prior, '^([^\t]*)\t(%d+)\t(%d)\t([^\t]*)\t([^\t]*)\t([%d,]*)\t' ..
          '([%w_%-]*)\t(%d+)\t(%-?%d+)\t([^\t]*)\t([01])$')
  if not name then
    name, first, rebased, fork, created, edits =
      string.match(prior, '^([^\t]*)\t(%d+)\t(%d)\t([^\t]*)\t([^\t]*)\t([%d,]*)$')
    if not name then
      corrupt(reqs_key, request, 'not the summary of an append')
    end
    prior_digest, updated_at, context, job, enqueued = '', updated_before, '-1', '', '0'
  end
  if prior_digest ~= '' and digest ~= '' and prior_digest ~= digest then
    fail('CONFLICT', {reason = 'request_reused', request = request})
  end
  local created_list, edit_list = {}, {}
  for item in string.gmatch(created, '[^\n]+') do
    created_list[#created_list + 1] = item
  end
  for item in string.gmatch(edits, '%d+') do
    edit_list[#edit_list + 1] = tonumber(item)
  end
  return {branch = name, first = tonumber(first), edits = edit_list,
          rebased = tonumber(rebased), conflict_fork = fork, created = created_list,
          updated_at = tonumber(updated_at), owner = '', indexed = 0, incarnation = '',
          context_tokens = tonumber(context), job = (string.gsub(job, ':', '\t')),
          enqueued = tonumber(enqueued), head_tokens = -1, resent = 1}
end

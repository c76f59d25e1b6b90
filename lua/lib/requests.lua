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

-- chat.lua: the chat hash's fields: their check before a script replies with the whole hash,
-- the updated_at that never moves back, and the bounds of a metadata merge.
-- Relies on: base, checks, msgpack.

-- The chat hash's fields the reader of a chat parses, besides metadata ("m:<key>", msgpack),
-- usage ("u:<counter>", counts) and the identity open_chat checks: true for counts and times,
-- false for text. All but the title, the retention and the redaction generation are always
-- there.
local CHAT_FIELDS = {created_at = true, updated_at = true, active_branch = false, title = false,
                     ttl = true, rgen = true}
local OPTIONAL_CHAT_FIELDS = {title = true, ttl = true, rgen = true}

-- The bytes a metadata value counts for: its own, or for a sealed value (a msgpack bin holding
-- "cs1", the key id's length and id, the nonce, the ciphertext and the tag) those of the value
-- it seals, so the bounds are the same with encryption as without.
local SEALED_OVERHEAD = 3 + 1 + 12 + 16
local BIN_HEADERS = {[196] = 2, [197] = 3, [198] = 5}
local function metadata_value_size(value, sealed)
  local header = sealed and BIN_HEADERS[string.byte(value, 1) or 0]
  if not header or #value < header + 4 then
    return #value
  end
  local size = #value - header - SEALED_OVERHEAD - string.byte(value, header + 4)
  return size > 0 and size or 0
end

-- Whether a msgpack value (one mp_skip passed) is a bin holding a sealed value ("cs1" first):
-- what a sealed chat's metadata values are. Whether it opens only the client can tell.
local function is_sealed_bin(value)
  local header = BIN_HEADERS[string.byte(value, 1) or 0]
  return header ~= nil and string.sub(value, header + 1, header + 3) == 'cs1'
end

-- Fails unless every field of the chat hash that the reader of a chat parses is well formed,
-- those in `replaced` (field name -> true) excepted: the caller overwrites them. A script that
-- writes the chat and replies with its whole hash calls it before its first write.
local function check_chat_hash(chat_key, replaced)
  local flat = redis.call('HGETALL', chat_key)
  local sealed = redis.call('HGET', chat_key, 'fmt') == SEALED_FORMAT
  local present = {}
  for i = 1, #flat, 2 do
    local name, value = flat[i], flat[i + 1]
    present[name] = true
    local prefix = string.sub(name, 1, 2)
    if replaced[name] then
      -- overwritten by the caller
    elseif not is_utf8(name) then
      fail('CORRUPT', {key = chat_key, reason = 'a field name that is not UTF-8'})
    elseif prefix == 'm:' then
      if mp_skip(value, 1) ~= #value + 1 then
        corrupt(chat_key, name, 'not a msgpack value ctxstore reads')
      elseif sealed and not is_sealed_bin(value) then
        corrupt(chat_key, name, 'not sealed, in a chat whose values are')
      end
    elseif sealed and name == 'title' and not string.find(value, '^[A-Za-z0-9+/]+=*$') then
      corrupt(chat_key, name, 'not a sealed title, in a chat whose values are')
    elseif prefix == 'u:' or CHAT_FIELDS[name] then
      number_field(chat_key, name, value)
    elseif CHAT_FIELDS[name] == false then
      text_field(chat_key, name, value)
    end
  end
  for name in pairs(CHAT_FIELDS) do
    if not OPTIONAL_CHAT_FIELDS[name] and not present[name] and not replaced[name] then
      corrupt(chat_key, name, 'missing')
    end
  end
end

-- The newer of the stored updated_at (read with number_field) and now: writers' clocks
-- differ, and it never moves back.
local function newer(stored, now)
  if now > stored then
    return now
  end
  return stored
end

-- Refuses (LIMIT, before anything is written) a metadata merge that would leave the chat with
-- more than max_keys metadata keys or max_bytes bytes of them (every "m:<key>" field name and
-- value counted; a sealed chat's values as the values they seal): the pairs are args[first..],
-- the chat's own fields are read one by one, never unpacked (a chat written before the bounds
-- may hold thousands).
local function check_metadata_merge(chat_key, args, first, max_keys, max_bytes, sealed)
  local sizes, keys, bytes = {}, 0, 0
  local stored = redis.call('HGETALL', chat_key)
  for i = 1, #stored, 2 do
    if string.sub(stored[i], 1, 2) == 'm:' then
      sizes[stored[i]] = #stored[i] + metadata_value_size(stored[i + 1], sealed)
      keys = keys + 1
      bytes = bytes + sizes[stored[i]]
    end
  end
  for i = first, #args, 2 do
    local before = sizes[args[i]]
    if before then
      bytes = bytes - before
    else
      keys = keys + 1
    end
    sizes[args[i]] = #args[i] + metadata_value_size(args[i + 1] or '', sealed)
    bytes = bytes + sizes[args[i]]
  end
  if keys > max_keys then
    fail('LIMIT', {what = 'metadata keys', limit = max_keys, size = keys})
  end
  if bytes > max_bytes then
    fail('LIMIT', {what = 'metadata bytes', limit = max_bytes, size = bytes})
  end
end

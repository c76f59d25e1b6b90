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

-- Fails unless every field of the chat hash that the reader of a chat parses is well formed,
-- those in `replaced` (field name -> true) excepted: the caller overwrites them. A script that
-- writes the chat and replies with its whole hash calls it before its first write.
local function check_chat_hash(chat_key, replaced)
  local flat = redis.call('HGETALL', chat_key)
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
      end
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
-- value counted): the pairs are args[first..], the chat's own fields are read one by one, never
-- unpacked (a chat written before the bounds may hold thousands).
local function check_metadata_merge(chat_key, args, first, max_keys, max_bytes)
  local sizes, keys, bytes = {}, 0, 0
  local stored = redis.call('HGETALL', chat_key)
  for i = 1, #stored, 2 do
    if string.sub(stored[i], 1, 2) == 'm:' then
      sizes[stored[i]] = #stored[i] + #stored[i + 1]
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
    sizes[args[i]] = #args[i] + #(args[i + 1] or '')
    bytes = bytes + sizes[args[i]]
  end
  if keys > max_keys then
    fail('LIMIT', {what = 'metadata keys', limit = max_keys, size = keys})
  end
  if bytes > max_bytes then
    fail('LIMIT', {what = 'metadata bytes', limit = max_bytes, size = bytes})
  end
end

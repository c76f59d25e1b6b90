-- checks.lua: checked values. Everything a script reads from Redis is checked before the
-- script relies on it (and before its first write): a malformed value is a CORRUPT error naming
-- its key and field, never a Lua error after a write or a silent default. The checks accept
-- exactly what ctxstore's Python reader accepts, so a value a script passes on never fails to
-- parse after the script wrote. Holds UTF-8 and id checks, number and text fields, and
-- open_chat, which checks a chat's identity (format, incarnation, owner, turn fence).
-- Relies on: base.

local MAX_EXACT = 9007199254740992  -- 2^53: Lua numbers are exact up to here
local MAX_ID_BYTES = 256

local function corrupt(key, field, reason)
  fail('CORRUPT', {key = key, field = field, reason = reason})
end

-- Fails unless a call's values are sealed exactly when the chat's are (fmt: the chat's format as
-- read): values in the clear for a sealed chat are SEALED (a store without encryption), sealed
-- values for a chat in the clear are CORRUPT (a store with encryption refuses such a chat).
local function check_sealed_call(chat_key, fmt, sealed)
  if (fmt == SEALED_FORMAT) ~= sealed then
    if not sealed then
      fail('SEALED', {})
    end
    corrupt(chat_key, 'fmt', 'a chat written without encryption, which a store with encryption '
            .. 'refuses (docs/encryption.md)')
  end
end

-- Whether s is UTF-8 as Python's strict decoder reads it: no overlong forms, no surrogates,
-- nothing past U+10FFFF. One pass over the bytes, none at all for ASCII.
local function is_utf8(s)
  if not string.find(s, '[\128-\255]') then
    return true
  end
  local i, n = 1, #s
  while i <= n do
    local c = string.byte(s, i)
    if c < 128 then
      i = i + 1
    else
      local width, low, high  -- the sequence's length and the range of its second byte
      if c >= 194 and c <= 223 then
        width, low, high = 2, 128, 191
      elseif c == 224 then
        width, low, high = 3, 160, 191
      elseif c == 237 then
        width, low, high = 3, 128, 159
      elseif c >= 225 and c <= 239 then
        width, low, high = 3, 128, 191
      elseif c == 240 then
        width, low, high = 4, 144, 191
      elseif c >= 241 and c <= 243 then
        width, low, high = 4, 128, 191
      elseif c == 244 then
        width, low, high = 4, 128, 143
      else
        return false
      end
      if i + width - 1 > n then
        return false
      end
      local b = string.byte(s, i + 1)
      if b < low or b > high then
        return false
      end
      for j = i + 2, i + width - 1 do
        b = string.byte(s, j)
        if b < 128 or b > 191 then
          return false
        end
      end
      i = i + width
    end
  end
  return true
end

-- Whether s is an id ctxstore accepts for a chat or user: 1 to 256 bytes of UTF-8 without
-- control characters (C0, DEL, C1) or braces.
local function is_key_id(s)
  if #s == 0 or #s > MAX_ID_BYTES then
    return false
  end
  if not string.find(s, '[%z\1-\31\127-\255{}]') then
    return true  -- plain ASCII, the usual case: one pass
  end
  return not string.find(s, '[%z\1-\31\127{}]') and not string.find(s, '\194[\128-\159]')
    and is_utf8(s)
end

-- What is wrong with a chat's identity (the field and why), or nil: the format must be one
-- this release reads (another release's format is a FORMAT error), the incarnation one
-- ctxstore generated and the owner an id it accepts. An incarnation or owner equal to the one
-- the caller sent was checked by the client already.
local function identity_problem(owner, fmt, inc, user, expected_inc)
  if not FORMATS_READ[fmt] then
    if fmt and string.find(fmt, '^[1-9]%d?%d?$') then
      fail('FORMAT', {format = fmt})  -- another release's chat: intact, not corrupt
    end
    return 'fmt', 'not a storage format of ctxstore'
  end
  if not inc or ((expected_inc == '' or inc ~= expected_inc)
                 and not string.find(inc, '^[a-z2-7]+$')) then
    return 'inc', 'not an incarnation'
  end
  if (user == '' or owner ~= user) and not is_key_id(owner) then
    return 'user_id', 'not a user id'
  end
  return nil
end

-- A count, position or time as ctxstore writes it (and HINCRBY and Python's int() read it):
-- decimal digits without a leading zero, at most 2^53. `default` (nil: the field is required)
-- stands in for an absent field.
local function number_field(key, field, raw, default)
  if not raw then  -- nil, or false: what redis.call gives for an absent field
    if default ~= nil then
      return default
    end
    corrupt(key, field, 'missing')
  end
  if #raw > 16 or not (raw == '0' or string.find(raw, '^[1-9]%d*$'))
      or tonumber(raw) > MAX_EXACT then
    corrupt(key, field, 'not a non-negative integer')
  end
  return tonumber(raw)
end


-- A text field: present and UTF-8.
local function text_field(key, field, raw)
  if not raw then
    corrupt(key, field, 'missing')
  elseif not is_utf8(raw) then
    corrupt(key, field, 'not UTF-8 text')
  end
  return raw
end

-- The chat's fields named in `names` (after owner, format and incarnation), once its identity is
-- checked: it exists, has this layout, is the incarnation the caller knew (expected_inc, "" for
-- any, optionally followed by "#<fence>") and belongs to the caller (user, "" for anyone: another
-- user's chat is NOT_FOUND, or REPLACED with an incarnation, as a missing one), and a
-- turn's fencing token is still the newest. Returns owner, incarnation, the rest. With
-- `fence_later`, the token is not checked but returned fourth: a script that recognizes a resent
-- call checks it after that (the first call may have been fenced in time, its resend not).
local function open_chat(chat_key, user, expected_inc, names, fence_later)
  local fence = ''
  local mark = string.find(expected_inc, '#', 1, true)
  if mark then
    fence = string.sub(expected_inc, mark + 1)
    expected_inc = string.sub(expected_inc, 1, mark - 1)
  end
  local fields = redis.call('HMGET', chat_key, 'user_id', 'fmt', 'inc', unpack(names or {}))
  local owner, fmt, inc = fields[1], fields[2], fields[3]
  if not owner then
    if redis.call('EXISTS', chat_key) == 1 then
      fail('CORRUPT', {key = chat_key, field = 'user_id', reason = 'chat without an owner'})
    end
    if expected_inc ~= '' then
      fail('REPLACED', {what = 'chat', reason = 'deleted'})
    end
    fail('NOT_FOUND', {what = 'chat'})
  end
  if user ~= '' and owner ~= user and is_key_id(owner) then
    -- Another user's chat answers exactly as a missing one does, before anything else about
    -- it is checked: a caller cannot tell which ids exist (chat UIs choose their own ids). An
    -- owner field that names nobody is corruption, reported as such below.
    if expected_inc ~= '' then
      fail('REPLACED', {what = 'chat', reason = 'deleted'})
    end
    fail('NOT_FOUND', {what = 'chat'})
  end
  local broken, reason = identity_problem(owner, fmt, inc, user, expected_inc)
  if broken then
    fail('CORRUPT', {key = chat_key, field = broken, reason = reason})
  end
  if expected_inc ~= '' and inc ~= expected_inc then
    fail('REPLACED', {what = 'chat', reason = 're-created'})
  end
  if fence_later then
    return owner, inc, {unpack(fields, 4)}, fence
  end
  check_fence(chat_key, fence)
  return owner, inc, {unpack(fields, 4)}
end

-- retention.lua: a chat's retention (its ttl field, a caller's ttl argument) and the expiry
-- every key of a chat shares.
-- Relies on: base.

-- The chat's retention in milliseconds from its `ttl` field (nil: it never expires), checked
-- before a script's first write.
local function chat_ttl(chat_key, raw)
  if not raw then
    return nil
  end
  local ms = tonumber(raw)
  if not ms or ms < 1 or ms ~= math.floor(ms) then
    fail('CORRUPT', {key = chat_key, field = 'ttl', reason = 'not a positive whole number'})
  end
  return ms
end

-- A retention given by the caller: milliseconds as a whole positive number, "" for none (nil).
local function ttl_argument(raw)
  if raw == '' then
    return nil
  end
  local ms = tonumber(raw)
  if not ms or ms < 1 or ms ~= math.floor(ms) then
    fail('INVALID', {reason = 'ttl must be a positive number of milliseconds', value = raw})
  end
  return ms
end

-- A write's last step for a chat with a retention: every key of the chat expires `ttl`
-- milliseconds from now, so they share one deadline and the chat vanishes whole (keys this
-- write created included). An answer stream's keys are left out: they expire on their own,
-- sooner.
local function slide_expiry(ttl, keys)
  if not ttl then
    return
  end
  for _, key in ipairs(keys) do
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Gives the chat the retention `ttl` (nil: none): the `ttl` field, and every key's expiry from
-- now (none at all without one).
local function set_retention(chat_key, ttl, keys)
  if ttl then
    redis.call('HSET', chat_key, 'ttl', ttl)
    slide_expiry(ttl, keys)
    return
  end
  redis.call('HDEL', chat_key, 'ttl')
  for _, key in ipairs(keys) do
    redis.call('PERSIST', key)
  end
end

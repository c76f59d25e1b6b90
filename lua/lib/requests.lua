-- requests.lua: resend detection. A write with a request id leaves a summary of its reply in
-- the req hash; a resent call finds it there and replies the same without writing twice. Two
-- generations (req, req_old) rotate every minute and expire on their own.
-- Relies on: checks.

-- How long a generation of request ids stays the current one.
local REQUEST_GENERATION_MS = 60000

-- The summary a write with this request id left, or nil. Ids live at least a minute.
local function recall_request(req_key, req_old_key, request)
  if request == '' then
    return nil
  end
  return redis.call('HGET', req_key, request) or redis.call('HGET', req_old_key, request)
end

-- When the chat's current request generation began (0: none yet), checked: the scripts that
-- remember requests read it before their first write.
local function request_since(chat_key, raw)
  return number_field(chat_key, 'req_since', raw, 0)
end

-- Remembers a write's summary; a generation older than a minute becomes the old one, and each
-- generation expires three minutes after it began, so an idle chat keeps none. `since` comes
-- from request_since.
local function remember_request(chat_key, req_key, req_old_key, request, summary, since, now)
  if request == '' then
    return
  end
  if now - since > REQUEST_GENERATION_MS then
    if redis.call('EXISTS', req_key) == 1 then
      redis.call('RENAME', req_key, req_old_key)
    else
      redis.call('DEL', req_old_key)
    end
    redis.call('HSET', chat_key, 'req_since', now)
    redis.call('HSET', req_key, request, summary)
    redis.call('PEXPIRE', req_key, 3 * REQUEST_GENERATION_MS)
    return
  end
  redis.call('HSET', req_key, request, summary)
end

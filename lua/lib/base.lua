-- base.lua: what every script stands on: the storage format's version, the length of a
-- record's tag, domain errors (fail raises one, run turns it into the error reply) and the turn
-- fence a write inside a turn must still hold. The storage layout and the conventions every
-- script follows are described in README.md, beside this file.
-- Relies on: nothing (Redis's own redis and cjson).

-- The storage format this release writes, and the formats it reads: its own and the one
-- before (format 2 is the first kept), and SEALED_FORMAT: format 2 with its values sealed by the
-- client (a chat of a store with encryption; docs/encryption.md). ctxstore/_core/format/
-- versions.py keeps the same three.
local FORMAT = '2'
local SEALED_FORMAT = '3'
local FORMATS_READ = {['2'] = true, ['3'] = true}
-- Every record ends with a 6-character random tag (msgpack fixstr: 7 bytes).
local TAG_LENGTH = 6

local function fail(code, details)
  error({ctx = 'CTX_' .. code .. ' ' .. cjson.encode(details)})
end

local function run(main)
  local ok, result = pcall(main)
  if ok then
    return result
  end
  if type(result) == 'table' and result.ctx then
    return redis.error_reply(result.ctx)
  end
  error(result, 0)
end

-- Refuses a write of a turn whose fencing token is no longer the chat's newest: another turn
-- took the chat since (the `turn` field is "<fence>\t<holder token>\t<expires>"). A lease that
-- expired but that nobody took since still writes: its token is still the newest.
local function check_fence(chat_key, fence)
  if fence == '' then
    return
  end
  local current = string.match(redis.call('HGET', chat_key, 'turn') or '', '^(%d+)\t')
  if current ~= fence then
    fail('CONFLICT', {reason = 'lease_lost', fence = fence, current = current or ''})
  end
end

-- add_usage.lua: add token counts to a chat's usage counters.
-- KEYS[1] chat      chat hash
-- KEYS[2] reqs      the ring of recent writes' reply summaries (see lib/requests.lua)
-- KEYS[3] log       the chat's other keys, whose expiry a write slides (see slide_expiry)
-- KEYS[4] alias
-- KEYS[5] runs
-- KEYS[6] branch
-- KEYS[7] checkpoint
-- KEYS[8] summary
-- KEYS[9] tok
-- ARGV[1] user      the caller, "" for anyone
-- ARGV[2] inc       the incarnation the caller knows, "" for any ("#<fence>" inside a turn)
-- ARGV[3] request   the call's request id: a resent call (its reply lost) adds nothing again
-- ARGV[4..] field, increment pairs ("u:<counter>" -> non-negative integer)
-- Reply: flat list of every usage field given and its value after this call; a resent call's:
--        {that list (the values now), 'resent'}
-- Errors: NOT_FOUND when the chat does not exist, REPLACED, CORRUPT (a stored
--         counter that is not a count), INVALID (a counter would pass 2^53: nothing is added).
-- HINCRBY makes concurrent additions from many workers all count. Every counter is read and
-- checked before the first is written, so a call adds all of its counts or none.

local MAX_COUNT = 9007199254740992  -- 2^53: Lua numbers are exact up to here

local FIRST_COUNTER_ARG = 4

return run(function()
  local _, _, fields, fence = open_chat(KEYS[1], ARGV[1], ARGV[2], {'req_slot', 'ttl'}, true)
  local slot = request_slot(KEYS[1], fields[1])
  local ttl = chat_ttl(KEYS[1], fields[2])
  if recall_request(KEYS[2], request_argument(ARGV[3])) then
    local reply = {}
    for i = FIRST_COUNTER_ARG, #ARGV, 2 do
      reply[#reply + 1] = ARGV[i]
      reply[#reply + 1] = redis.call('HGET', KEYS[1], ARGV[i]) or '0'
    end
    return {reply, 'resent'}
  end
  check_fence(KEYS[1], fence)
  for i = FIRST_COUNTER_ARG, #ARGV, 2 do
    local current = number_field(KEYS[1], ARGV[i], redis.call('HGET', KEYS[1], ARGV[i]), 0)
    local add = tonumber(ARGV[i + 1])
    if not add or add < 0 or current + add > MAX_COUNT then
      fail('INVALID', {reason = 'a usage counter would pass 2^53', field = ARGV[i]})
    end
  end
  local reply = {}
  for i = FIRST_COUNTER_ARG, #ARGV, 2 do
    reply[#reply + 1] = ARGV[i]
    reply[#reply + 1] = redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  end
  remember_in_chat(KEYS[1], KEYS[2], ARGV[3], 'added', slot)
  slide_expiry(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                     KEYS[9]})
  return reply
end)

-- tokens.lua: token entries (the tok key: a flags byte and the chain's tokens per position)
-- and window_size, the newest messages a window of tokens and messages keeps.
-- Relies on: base, runs.

local TOK_WIDTH = 6
local TOOL_RESULT = 1
local MAX_CHAIN_TOKENS = 1099511627775  -- 2^40 - 1

-- Flags and chain tokens of the entry at byte `offset` (0-based) of s.
local function tok_decode(s, offset)
  local flags, a, b, c, d, e = string.byte(s, offset + 1, offset + TOK_WIDTH)
  return flags, (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end

local function tok_encode(flags, total)
  local out = {}
  for i = TOK_WIDTH, 2, -1 do
    local byte = total % 256
    out[i] = string.char(byte)
    total = (total - byte) / 256
  end
  out[1] = string.char(flags)
  return table.concat(out)
end

-- Flags and chain tokens of position p (0, 0 for -1: before a root).
local function tok_at(tok_key, p)
  if p < 0 then
    return 0, 0
  end
  local s = redis.call('GETRANGE', tok_key, p * TOK_WIDTH, p * TOK_WIDTH + TOK_WIDTH - 1)
  if #s ~= TOK_WIDTH then
    fail('CORRUPT', {key = tok_key, field = tostring(p), reason = 'a position without tokens'})
  end
  return tok_decode(s, 0)
end

-- How many of the newest messages of the chain ending at head (depth messages long) a window
-- keeps: the longest suffix within max_tokens tokens (nil: any) and max_messages messages
-- (nil: any) that does not start with a tool result (its call is outside: the group is
-- dropped whole). When that is empty because of max_tokens, the newest message is kept alone
-- with its tool group (a tool result comes with the results before it and their call), unless
-- the group is longer than max_messages. One GETRANGE per run walked and per binary-search
-- probe; no record is read.
local function window_size(runs_key, tok_key, head, depth, max_tokens, max_messages)
  if head < 0 then
    return 0
  end
  local limit = depth
  if max_messages and max_messages < limit then
    limit = max_messages
  end
  local _, head_total = tok_at(tok_key, head)
  local floor = -1  -- the chain tokens a kept suffix may start after
  if max_tokens then
    floor = head_total - max_tokens
  end
  local kept, p, oldest, hops = 0, head, head + 1, 0
  while p >= 0 and kept < limit and hops < MAX_RUNS_PER_CALL do
    hops = hops + 1
    local start, parent = run_of(runs_key, p)
    local lowest = math.max(start, p - (limit - kept) + 1)
    local _, before = tok_at(tok_key, lowest == start and parent or lowest - 1)
    if before < floor then
      -- Binary search: the oldest q in (lowest, p] whose predecessor q-1 holds >= floor tokens.
      local lo, hi = lowest + 1, p + 1
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local _, at = tok_at(tok_key, mid - 1)
        if at >= floor then
          hi = mid
        else
          lo = mid + 1
        end
      end
      lowest = lo
    end
    if lowest <= p then
      kept = kept + p - lowest + 1
      oldest = lowest
    end
    if lowest > start then
      break
    end
    p = parent
  end
  -- The oldest kept messages may be tool results whose call fell outside: drop them.
  while kept > 0 do
    local flags = tok_at(tok_key, oldest)
    if flags % 2 ~= TOOL_RESULT then
      break
    end
    kept = kept - 1
    if kept > 0 then
      oldest = position_back(runs_key, head, kept - 1)
    end
  end
  if kept == 0 and max_tokens and limit > 0 then
    -- Nothing fits: the newest message alone, with the tool group it closes.
    local group, q = 1, head
    while (tok_at(tok_key, q)) % 2 == TOOL_RESULT do
      q = parent_at(runs_key, q)
      if q < 0 then
        break
      end
      group = group + 1
    end
    if group <= limit then
      kept = group
    end
  end
  return kept
end

-- streams.lua: answer streams. While an answer is streamed, its text is mirrored into the
-- chat's `stream` key (a Redis Stream holding the entries of all its answers) so that a reader
-- in another process can follow it and resume it. An answer's stream id is "<id of its first
-- entry>.<tag>"; its entries are {t <tag>} (the first), {s <stream id> d <text>} (a piece of
-- text), then {s <stream id> e <message id>} (the answer was saved) or {s <stream id> f
-- <reason>} (it failed). `stream_state` holds a record per stream:
-- "<incarnation>\t<branch>\t<state>\t<deadline>\t<writes>\t<detail>", state live (deadline:
-- the writer must write again before it), done or failed (deadline: the stream expires then;
-- detail: the message id or the reason). Both keys expire on their own.
-- Relies on: base, checks.

-- The parts of a stream id (first entry's milliseconds and sequence, tag), or nil.
local function stream_id_parts(sid)
  local ms, seq, tag = string.match(sid, '^(%d+)%-(%d+)%.([a-z2-7]+)$')
  if not ms or #ms > 15 or #seq > 15 or #tag ~= TAG_LENGTH then
    return nil
  end
  return tonumber(ms), tonumber(seq), tag
end

-- The decoded record of stream `sid`, checked (a CORRUPT error names the key and field).
local function parse_stream_record(key, sid, raw)
  local inc, branch, state, deadline, writes, detail =
    string.match(raw, '^([a-z2-7]+)\t([^\t]+)\t(%l+)\t(%d+)\t(%d+)\t(.*)$')
  local ms, seq, tag = stream_id_parts(sid)
  if not inc or not ms or (state ~= 'live' and state ~= 'done' and state ~= 'failed')
      or #deadline > 15 or #writes > 15 or not is_utf8(branch) or not is_utf8(detail) then
    corrupt(key, sid, 'not an answer stream record')
  end
  return {sid = sid, inc = inc, branch = branch, state = state, deadline = tonumber(deadline),
          writes = tonumber(writes), detail = detail, ms = ms, seq = seq, tag = tag}
end

local function format_stream_record(r)
  return r.inc .. '\t' .. r.branch .. '\t' .. r.state .. '\t' .. r.deadline .. '\t' .. r.writes
    .. '\t' .. r.detail
end

-- Every record of the chat's answer streams, checked, oldest first.
local function stream_records(key)
  local flat = redis.call('HGETALL', key)
  local records = {}
  for i = 1, #flat, 2 do
    records[#records + 1] = parse_stream_record(key, flat[i], flat[i + 1])
  end
  table.sort(records, function(a, b)
    return a.ms < b.ms or (a.ms == b.ms and a.seq < b.seq)
  end)
  return records
end

-- How long past its deadline a live stream's record stays when its writer stops writing (a
-- worker that died mid-answer): a reader, or a page reloaded, then learns that the answer
-- failed ("stopped") instead of finding no stream at all.
local STOPPED_KEPT_MS = 600000

-- The keys of the answer streams expire with the last deadline of the records `records`
-- (after `now`; a live record's deadline plus STOPPED_KEPT_MS), or now when there is none.
local function expire_with_records(keys, records, now)
  local last = now
  for _, r in ipairs(records) do
    local until_ms = r.deadline
    if r.state == 'live' then
      until_ms = until_ms + STOPPED_KEPT_MS
    end
    if until_ms > last then
      last = until_ms
    end
  end
  for _, key in ipairs(keys) do
    redis.call('PEXPIRE', key, math.max(last - now, 1))
  end
end

-- Keys that expire on their own live at least `ms` more milliseconds (never less than they had).
local function keep_at_least(keys, ms)
  for _, key in ipairs(keys) do
    local left = redis.call('PTTL', key)
    if left == -1 or (left >= 0 and left < ms) then
      redis.call('PEXPIRE', key, ms)
    end
  end
end

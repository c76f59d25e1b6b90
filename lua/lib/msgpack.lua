-- msgpack.lua: the little msgpack Lua writes (big-endian bytes, small integers, strings) and
-- the walk that checks stored msgpack before a script passes it on. Not every Lua has a msgpack
-- library (the embedded store's has none), so this is plain Lua.
-- Relies on: checks.

local function byte_string(n, width)
  local out = {}
  for i = width, 1, -1 do
    out[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(out)
end

-- A msgpack integer >= -1 (positions and counts).
local function pack_int(n)
  if n == -1 then
    return '\255'
  elseif n < 128 then
    return string.char(n)
  elseif n < 256 then
    return '\204' .. string.char(n)
  elseif n < 65536 then
    return '\205' .. byte_string(n, 2)
  end
  return '\206' .. byte_string(n, 4)
end

local function pack_str(s)
  local n = #s
  if n < 32 then
    return string.char(160 + n) .. s
  elseif n < 256 then
    return '\217' .. string.char(n) .. s
  end
  return '\218' .. byte_string(n, 2) .. s
end

-- What Lua checks ------------------------------------------------------------------------------
-- Payloads and metadata stay opaque to Lua; a script that passes stored msgpack on to the
-- client after writing checks it first, with the rules of ctxstore's reader: strings in UTF-8,
-- map keys of scalar types, no extension types (ctxstore never writes them), at most 1,024
-- nested arrays and maps.

local MSGPACK_MAX_DEPTH = 1024
-- Types whose header gives a length (bin, str) or a count (array, map) in 1, 2 or 4 bytes.
local MSGPACK_SIZED = {
  [0xc4] = {'bin', 1}, [0xc5] = {'bin', 2}, [0xc6] = {'bin', 4},
  [0xd9] = {'str', 1}, [0xda] = {'str', 2}, [0xdb] = {'str', 4},
  [0xdc] = {'array', 2}, [0xdd] = {'array', 4}, [0xde] = {'map', 2}, [0xdf] = {'map', 4},
}

-- The value whose header starts at byte i of s: its kind ('int', 'scalar', 'str', 'bin',
-- 'array', 'map'), the byte after its header, and its payload's length in bytes (an array's or
-- a map's item count); nil when no value ctxstore reads starts there.
local function mp_head(s, i)
  local c = string.byte(s, i)
  if not c then
    return nil
  elseif c <= 0x7f or c >= 0xe0 then
    return 'int', i + 1, 0
  elseif c <= 0x8f then
    return 'map', i + 1, c - 0x80
  elseif c <= 0x9f then
    return 'array', i + 1, c - 0x90
  elseif c <= 0xbf then
    return 'str', i + 1, c - 0xa0
  elseif c == 0xc0 or c == 0xc2 or c == 0xc3 then
    return 'scalar', i + 1, 0
  elseif c == 0xca or c == 0xcb then
    return 'scalar', i + 1, c == 0xca and 4 or 8
  elseif c >= 0xcc and c <= 0xd3 then
    return 'int', i + 1, 2 ^ ((c - 0xcc) % 4)
  end
  local sized = MSGPACK_SIZED[c]
  if not sized or i + sized[2] > #s then
    return nil
  end
  local n = 0
  for j = i + 1, i + sized[2] do
    n = n * 256 + string.byte(s, j)
  end
  return sized[1], i + 1 + sized[2], n
end

-- The byte after the one msgpack value starting at byte i of s, or nil when none ctxstore reads
-- starts there. Every value read takes at least one byte, so the walk ends within #s steps.
local function mp_skip(s, i)
  local n = #s
  local left, maps, seen = {1}, {false}, {0}  -- per open array or map: items left, kind, read
  while #left > 0 do
    local d = #left
    if left[d] == 0 then
      left[d], maps[d], seen[d] = nil, nil, nil
    else
      left[d] = left[d] - 1
      local is_key = maps[d] and seen[d] % 2 == 0
      seen[d] = seen[d] + 1
      local kind, from, size = mp_head(s, i)
      if not kind then
        return nil
      end
      if kind == 'array' or kind == 'map' then
        if is_key or d > MSGPACK_MAX_DEPTH then
          return nil
        end
        left[d + 1] = kind == 'map' and 2 * size or size
        maps[d + 1], seen[d + 1] = kind == 'map', 0
        i = from
      else
        i = from + size
        if i > n + 1 or (kind == 'str' and not is_utf8(string.sub(s, from, i - 1))) then
          return nil
        end
      end
    end
  end
  return i
end

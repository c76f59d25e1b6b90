-- calls.lua: a script's call fields and its reply, by name. A script whose header lists
-- `call.<name>` lines takes those fields tab-joined in ARGV[1] (one argument: each costs the
-- client and Redis time); one whose header lists `reply.<name>` lines replies with those values
-- in that order. The loader (src/ctxstore/_core/scripts.py) defines CALL_FIELDS, CALL_SHAPES
-- (a field's Lua pattern, from the backticks after its name) and REPLY_FIELDS from the header
-- for the script, so adding a field is one header line here and one field in its Python call
-- builder (a test compares the two).
-- Relies on: base.

-- The fields of `text` by name: exactly one per name of `names`, each matching its shape in
-- `shapes` when it has one (else anything without a tab). INVALID otherwise.
local function call_fields(text, names, shapes)
  local call, count = {}, 0
  for item in string.gmatch(text .. '\t', '([^\t]*)\t') do
    count = count + 1
    local name = names[count]
    if name == nil then
      fail('INVALID', {reason = 'malformed call fields', fields = count})
    end
    local shape = shapes[name]
    if shape ~= nil and not string.find(item, shape) then
      fail('INVALID', {reason = 'malformed call fields', field = name})
    end
    call[name] = item
  end
  if count ~= #names then
    fail('INVALID', {reason = 'malformed call fields', fields = count})
  end
  return call
end

-- The reply `values` (a table by name) as the list the header orders: a name left unset is a
-- script error, never a shorter reply.
local function reply_of(values, names)
  local out = {}
  for index, name in ipairs(names) do
    local value = values[name]
    if value == nil then
      error('reply.' .. name .. ' was not set')
    end
    out[index] = value
  end
  return out
end

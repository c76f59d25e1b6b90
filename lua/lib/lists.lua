-- lists.lua: commands over long lists, run in slices (unpack() of a very long list
-- overflows the Lua stack).
-- Relies on: nothing.

-- Runs `command key <items>` in slices: unpack() of a very long list overflows the Lua stack.
local function in_slices(command, key, items)
  local slice = 1000
  for first = 1, #items, slice do
    redis.call(command, key, unpack(items, first, math.min(first + slice - 1, #items)))
  end
end

-- Runs `command key args[from..to]` in slices of 1000 (pairs stay whole), straight from the
-- call's arguments (a function's `args`, a script's ARGV):
-- no copy of a long call's arguments passes through a Lua table.
local function argv_in_slices(args, command, key, from, to)
  for first = from, to, 1000 do
    redis.call(command, key, unpack(args, first, math.min(first + 999, to)))
  end
end

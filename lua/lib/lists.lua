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

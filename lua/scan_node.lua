-- scan_node.lua: one step of a SCAN of the node that holds KEYS[1]'s slot.
-- FLAGS no-writes  (only reads: called with FCALL_RO; a test checks it)
-- KEYS[1] route     a key of a slot the node serves (it names nothing: it routes this call)
-- ARGV[1] cursor    where the scan stands ("0" to start)
-- ARGV[2] pattern   the keys to return (MATCH)
-- ARGV[3] count     how many keys this step looks at (COUNT)
-- Reply: {next cursor ("0" when the scan is done), {keys}}
-- A Cluster's SCAN walks one node; a script declaring a key of that node's slots is how a
-- call reaches a chosen primary through the ordinary routing. Nothing is written.

return run(function()
  local _route = KEYS[1]  -- routes the call to its node; never read
  return redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
end)

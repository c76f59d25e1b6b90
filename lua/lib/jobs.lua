-- jobs.lua: adding a compaction job to its shard's stream, and counting the jobs the stream's
-- bound trims before a worker took them (the workers page shows the count; workers log it).
-- Relies on: nothing.

-- Compaction job streams keep about this many entries (`ctxstore._core.format.jobs`). Workers
-- delete each job as they acknowledge it, so a stream holds the jobs still to do, and what the
-- bound trims is work no worker did.
local JOB_STREAM_MAXLEN = 100000

-- Adds the job (field, value pairs) to `stream` and adds what the bound trimmed to the
-- counter `trimmed` (a key of the stream's slot). Returns the entry id.
local function enqueue_job(stream, trimmed, fields)
  local before = redis.call('XLEN', stream)
  local id = redis.call('XADD', stream, 'MAXLEN', '~', JOB_STREAM_MAXLEN, '*', unpack(fields))
  local lost = before + 1 - redis.call('XLEN', stream)
  if lost > 0 then
    redis.call('INCRBY', trimmed, lost)
  end
  return id
end

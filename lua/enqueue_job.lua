-- enqueue_job.lua: add a compaction job to its shard's stream (a Cluster's saves and
-- redactions, whose chats live in other slots than the streams).
-- KEYS[1] jobs      the compaction job stream of the chat's shard
-- KEYS[2] trimmed   the count of that stream's jobs trimmed before a worker took them
-- ARGV[1..] the job's field, value pairs (see ctxstore._core.format.jobs)
-- Reply: the entry id

return run(function()
  return enqueue_job(KEYS[1], KEYS[2], ARGV)
end)

-- threads.lua: LangGraph threads (ctxstore.integrations.langgraph): a checkpoint record's
-- header, the lexical ranges of a namespace's checkpoints and of a checkpoint's writes, and one
-- checkpoint as the reads return it. (A thread's keys share their expiry: the writes re-arm
-- them all with retention.lua's slide_expiry, so an active thread never loses an ancestor.)
-- Relies on: checks.

-- Between the parts of a member or a field name ("<ns>\31<checkpoint id>..."); a namespace, an
-- id, a channel or a task id never holds it (the client refuses them).
local US = '\31'

-- The parent id, run id and channel versions (channel -> version) of a checkpoint record:
-- "<parent>\30<run id>\30<channel>\31<version>\29...\30<payload>" (the payload is the client's).
local function checkpoint_header(key, field, record)
  local parent, run_id, versions = string.match(record, '^([^\30]*)\30([^\30]*)\30([^\30]*)\30')
  if not parent then
    corrupt(key, field, 'not a checkpoint record')
  end
  local map = {}
  for channel, version in string.gmatch(versions, '([^\29\31]*)\31([^\29\31]*)') do
    map[channel] = version
  end
  return parent, run_id, map
end

-- The bounds of ZRANGEBYLEX for the members that start with `prefix` and US (' ' is the byte
-- after US): min, max.
local function prefix_range(prefix)
  return '[' .. prefix .. US, '(' .. prefix .. ' '
end

-- One checkpoint as the reads return it: {ns, id, record, {channel, version, value, ...} of
-- the blobs of its versions (a missing or empty one left out), {member, value, ...} of its
-- pending writes in writes_sort_key order}, or nil when there is no such checkpoint. `keys`:
-- lg_cp, lg_blob, lg_writes, lg_values.
local function checkpoint_reply(keys, ns, id)
  local field = ns .. US .. id
  local record = redis.call('HGET', keys[1], field)
  if not record then
    return nil
  end
  local _, _, versions = checkpoint_header(keys[1], field, record)
  local blobs, names = {}, {}
  for channel, version in pairs(versions) do
    names[#names + 1] = channel
    names[#names + 1] = version
  end
  for i = 1, #names, 2 do
    local value = redis.call('HGET', keys[2], ns .. US .. names[i] .. US .. names[i + 1])
    if value and value ~= '' then
      blobs[#blobs + 1], blobs[#blobs + 2], blobs[#blobs + 3] = names[i], names[i + 1], value
    end
  end
  local writes = {}
  local low, high = prefix_range(field)
  for _, member in ipairs(redis.call('ZRANGEBYLEX', keys[3], low, high)) do
    writes[#writes + 1] = member
    writes[#writes + 1] = redis.call('HGET', keys[4], member) or ''
  end
  return {ns, id, record, blobs, writes}
end

-- Removes the checkpoints `fields` ("<ns>\31<id>") of a thread, their writes, and every blob no
-- checkpoint left names; returns how many checkpoints went. `keys`: lg_cp, lg_order, lg_ids,
-- lg_blob, lg_writes, lg_values.
local function drop_checkpoints(keys, fields)
  local dropped = 0
  for _, field in ipairs(fields) do
    if redis.call('HDEL', keys[1], field) == 1 then
      dropped = dropped + 1
    end
    redis.call('ZREM', keys[2], field)
    local at = string.find(field, US, 1, true)
    redis.call('ZREM', keys[3], string.sub(field, at + 1) .. US .. string.sub(field, 1, at - 1))
    local low, high = prefix_range(field)
    for _, member in ipairs(redis.call('ZRANGEBYLEX', keys[5], low, high)) do
      redis.call('ZREM', keys[5], member)
      redis.call('HDEL', keys[6], member)
    end
  end
  if dropped == 0 then
    return 0
  end
  local named = {}
  local flat = redis.call('HGETALL', keys[1])
  for i = 1, #flat, 2 do
    local at = string.find(flat[i], US, 1, true)
    local ns = string.sub(flat[i], 1, at - 1)
    local _, _, versions = checkpoint_header(keys[1], flat[i], flat[i + 1])
    for channel, version in pairs(versions) do
      named[ns .. US .. channel .. US .. version] = true
    end
  end
  for _, field in ipairs(redis.call('HKEYS', keys[4])) do
    if not named[field] then
      redis.call('HDEL', keys[4], field)
    end
  end
  return dropped
end

-- Claim one spawn request from the first of several streams that has one: a worker reads only
-- the streams of its own queue (its session's, or its pool's for the profiles it knows), so a
-- request it cannot serve is never delivered to it.
-- KEYS: the streams, in the order to look (the caller rotates it so no stream starves).
-- ARGV: the group, our consumer name, the lease in ms, '1' to look for expired leases first.
-- A stream whose group is missing (first use, or a Redis that came back empty) gets it here,
-- at id 0 so nothing already queued is skipped. A key that refuses (WRONGTYPE: someone SET it)
-- is skipped, so one broken profile never stops the claims of the others.
-- Returns {created, looked, stream, id, fields, how, broken}: the streams whose group was
-- created, how many streams were looked at (their groups now exist, unless broken), then the
-- entry found ('' and {} for none) and how it was found ('expired', 'new' or ''), and the
-- streams skipped with their error, flat: {key, error, key, error, ...}.
local group, consumer, lease = ARGV[1], ARGV[2], ARGV[3]
local look_for_expired = ARGV[4] == '1'
local created, broken = {}, {}

local function nogroup(reply)
  return type(reply) == 'table' and type(reply.err) == 'string'
    and string.sub(reply.err, 1, 7) == 'NOGROUP'
end

local function failed(reply)
  return type(reply) == 'table' and type(reply.err) == 'string'
end

-- The command's reply; a missing group is created once and the command run again. An error
-- reply is returned as it is, for the caller to skip the stream.
local function group_call(key, ...)
  local reply = redis.pcall(...)
  if nogroup(reply) then
    local made = redis.pcall('XGROUP', 'CREATE', key, group, '0', 'MKSTREAM')
    if failed(made) then
      return made
    end
    created[#created + 1] = key
    reply = redis.pcall(...)
  end
  return reply
end

-- An entry whose claimant's lease expired, nil for none, or an error reply.
local function expired(key)
  -- At most a few rounds: an expired entry deleted meanwhile leaves the pending list on XCLAIM.
  for _ = 1, 8 do
    local idle = group_call(key, 'XPENDING', key, group, 'IDLE', lease, '-', '+', 1)
    if failed(idle) then
      return idle
    end
    if not idle[1] then
      return nil
    end
    local taken = redis.pcall('XCLAIM', key, group, consumer, lease, idle[1][1])
    if failed(taken) then
      return taken
    end
    if type(taken[1]) == 'table' and type(taken[1][2]) == 'table' then
      return taken[1]
    end
  end
  return nil
end

for i, key in ipairs(KEYS) do
  local entry, how = nil, ''
  if look_for_expired then
    entry = expired(key)
    how = 'expired'
  end
  if not entry then
    entry = group_call(key, 'XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1,
      'STREAMS', key, '>')
    if not failed(entry) then
      entry = entry and entry[1] and entry[1][2][1] or nil
      how = 'new'
    end
  end
  if failed(entry) then
    broken[#broken + 1] = key
    broken[#broken + 1] = entry.err
  elseif entry then
    return {created, i, key, entry[1], entry[2], how, broken}
  end
end
return {created, #KEYS, '', '', {}, '', broken}

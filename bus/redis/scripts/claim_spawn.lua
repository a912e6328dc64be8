-- Claim one spawn request from the first of several streams that has one: a worker reads only
-- the streams of its own queue (its session's, or its pool's for the profiles it knows), so a
-- request it cannot serve is never delivered to it.
-- KEYS: the streams, in the order to look (the caller rotates it so no stream starves), then
-- their tag's leases (a sorted set: consumer -> when its lease lapses, server ms; keep_lease.lua).
-- ARGV: the group, our consumer name, the lease in ms, '1' to look for expired leases first.
-- A request has expired when its consumer's lease lapsed and it has been idle a lease: the
-- consumers are listed (XINFO CONSUMERS, one row a worker), not the requests (one a running
-- agent). A stream whose group is missing (first use, or a Redis that came back empty) gets it
-- here, at id 0 so nothing already queued is skipped. A key that refuses (WRONGTYPE: someone SET
-- it) is skipped, so one broken profile never stops the claims of the others.
-- Returns {created, looked, stream, id, fields, how, broken, kept}: the streams whose group was
-- created, how many streams were looked at (their groups now exist, unless broken), then the
-- entry found ('' and {} for none) and how it was found ('expired', 'new' or ''), the streams
-- skipped with their error, flat: {key, error, key, error, ...}, and whether our own lease was
-- live when an entry was found (1 or 0; it is made live for a lease with the entry; 1 when none
-- was found and it was not touched). 0 means our lease had lapsed: what we held may have been
-- taken meanwhile.
local group, consumer, lease = ARGV[1], ARGV[2], ARGV[3]
local look_for_expired = ARGV[4] == '1'
local streams, leases = #KEYS - 1, KEYS[#KEYS]
local now -- the server's time in ms, read once when first needed
local created, broken = {}, {}

-- No group on the key, or no key at all (XINFO's answer where XPENDING says NOGROUP).
local function nogroup(reply)
  return type(reply) == 'table' and type(reply.err) == 'string'
    and (string.sub(reply.err, 1, 7) == 'NOGROUP' or reply.err == 'ERR no such key')
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

local function field(row, name)
  for i = 1, #row, 2 do
    if row[i] == name then
      return row[i + 1]
    end
  end
  return nil
end

-- An entry of `name`, idle a lease, that we now hold; nil for none, or an error reply.
local function take_from(key, name)
  -- At most a few rounds: an expired entry deleted meanwhile leaves the pending list on XCLAIM.
  for _ = 1, 8 do
    local idle = redis.pcall('XPENDING', key, group, 'IDLE', lease, '-', '+', 1, name)
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

local function server_ms()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- Whether `name`'s lease is live.
local function live(name)
  local lapses_at = redis.call('ZSCORE', leases, name)
  return lapses_at and tonumber(lapses_at) > server_ms()
end

-- An entry whose claimant's lease expired, nil for none, or an error reply. Our own entries
-- are never taken here: a worker whose lease lapsed finds out at its next beat.
local function expired(key)
  local rows = group_call(key, 'XINFO', 'CONSUMERS', key, group)
  if failed(rows) then
    return rows
  end
  for _, row in ipairs(rows) do
    local name = field(row, 'name')
    if name ~= consumer and (field(row, 'pending') or 0) > 0 and not live(name) then
      local entry = take_from(key, name)
      if entry then
        return entry
      end
    end
  end
  return nil
end

-- Whether our lease was live; it is made live for a lease either way (as keep_lease.lua).
local function keep_own_lease()
  local was = live(consumer)
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', server_ms())
  redis.call('ZADD', leases, server_ms() + tonumber(lease), consumer)
  if redis.call('PTTL', leases) < tonumber(lease) then
    redis.call('PEXPIRE', leases, lease)
  end
  return was and 1 or 0
end

for i = 1, streams do
  local key = KEYS[i]
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
    return {created, i, key, entry[1], entry[2], how, broken, keep_own_lease()}
  end
end
return {created, streams, '', '', {}, '', broken, 1}

-- A session ended: every key of it expires after the retention, in one step (every key carries
-- the session's hash tag: one Cluster slot).
-- KEYS: the session's keys; the first ARGV[3] of them are inboxes nobody reads any more (the
-- lead's), emptied now: their group goes, with its pending list, and every entry.
-- ARGV: the retention in ms, the inbox group, how many of KEYS to empty.
-- On every other stream, consumers whose pending list is empty are deleted (the check and the
-- delete in this one step: XGROUP DELCONSUMER would drop a pending entry with its consumer).
-- Returns {keys found, consumers deleted, entries dropped}.
local ttl, group, drop = ARGV[1], ARGV[2], tonumber(ARGV[3])
local found, consumers, dropped = 0, 0, 0

local function field(row, name)
  for i = 1, #row, 2 do
    if row[i] == name then
      return row[i + 1]
    end
  end
  return nil
end

for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' then
    found = found + 1
    if kind == 'stream' and i <= drop then
      dropped = dropped + redis.call('XLEN', key)
      redis.pcall('XGROUP', 'DESTROY', key, group)
      redis.call('XTRIM', key, 'MAXLEN', 0)
    elseif kind == 'stream' then
      local rows = redis.pcall('XINFO', 'CONSUMERS', key, group)
      if type(rows) == 'table' and not rows.err then
        for _, row in ipairs(rows) do
          if field(row, 'pending') == 0 then
            redis.call('XGROUP', 'DELCONSUMER', key, group, field(row, 'name'))
            consumers = consumers + 1
          end
        end
      end
    end
    redis.call('PEXPIRE', key, ttl)
  end
end
return {found, consumers, dropped}

-- A session's lead: take or renew its lease and write its record in one step, or write nothing
-- when another lead holds the lease (so a lead taken over never writes over its successor).
-- KEYS[1] the lease (a string with a TTL), KEYS[2] the lead's record (a hash), and optionally
-- KEYS[3] an inbox (a stream) the write is conditional on; one hash tag.
-- ARGV[1] the holder, ARGV[2] the lease in ms ('0': write, then give the lease up), ARGV[3] the
-- inbox's consumer group ('' without KEYS[3]), ARGV[4..] field, value, ... to merge into the record.
-- Returns {1, '', 0} when written (the lease is the holder's, or given up); {0, the other holder,
-- its remaining ms} when another holds it; {2, '', 0} when the record was not written because the
-- inbox holds an entry its group has not delivered to anyone yet (the lease is taken or renewed
-- all the same).
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return {0, holder, redis.call('PTTL', KEYS[1])}
end

-- Whether stream id a comes after b ('ms-seq'; ms fits a Lua number exactly).
local function after(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end

local written = true
if #KEYS > 2 and redis.call('EXISTS', KEYS[3]) == 1 then
  local newest = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
  if #newest > 0 then
    local delivered = '0-0'
    for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[3])) do
      local name, last = nil, nil
      for i = 1, #group, 2 do
        if group[i] == 'name' then name = group[i + 1] end
        if group[i] == 'last-delivered-id' then last = group[i + 1] end
      end
      if name == ARGV[3] then delivered = last end
    end
    if after(newest[1][1], delivered) then
      written = false
    end
  end
end

if written and #ARGV > 3 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 4))
end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if written then
  return {1, '', 0}
end
return {2, '', 0}

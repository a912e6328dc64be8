-- A session's lead: take or renew its lease and write its record in one step, or write nothing
-- when another lead holds the lease (so a lead taken over never writes over its successor).
-- KEYS[1] the lease (a string with a TTL), KEYS[2] the lead's record (a hash); one hash tag.
-- ARGV[1] the holder, ARGV[2] the lease in ms ('0': write, then give the lease up),
-- ARGV[3..] field, value, ... to merge into the record.
-- Returns {1, '', 0} when written (the lease is the holder's, or given up), else
-- {0, the other holder, its remaining ms}.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return {0, holder, redis.call('PTTL', KEYS[1])}
end
if #ARGV > 2 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 3))
end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return {1, '', 0}

-- Append entries to an event log unless a hash field already records the mark, and record it, in
-- one step: a step a dead process may have done already is redone without logging it twice.
-- KEYS[1] the stream (also the wake-up channel), KEYS[2] the hash (an agent's state).
-- ARGV: field, mark, MAXLEN ~ cap, then the entries' 'event' values. Returns the entry ids, or
-- an empty table when the mark was already there.
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  return {}
end
local ids = {}
for i = 4, #ARGV do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'event', ARGV[i])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if #ids > 0 then
  redis.call('PUBLISH', KEYS[1], ids[#ids])
end
return ids

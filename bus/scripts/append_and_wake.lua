-- XADD one field and PUBLISH a wake-up in one step: the entry is in the stream with its wake-up
-- sent, or not there at all.
-- KEYS[1] the stream; ARGV: field, value, channel, payload to publish ('' publishes the new
-- entry's id), MAXLEN ~ cap ('' for none). Returns the entry id.
local id
if ARGV[5] ~= '' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], '*', ARGV[1], ARGV[2])
else
  id = redis.call('XADD', KEYS[1], '*', ARGV[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4] ~= '' and ARGV[4] or id)
return id

-- XADD one field and PUBLISH a wake-up in one step: the entry is in the stream with its wake-up
-- sent, or not there at all.
-- KEYS[1] the stream; ARGV: field, value, channel, payload to publish ('' publishes the new
-- entry's id), MAXLEN ~ cap ('' for none), then any more field/value pairs for the same entry
-- (an envelope's signature). Returns the entry id.
local args = {KEYS[1]}
if ARGV[5] ~= '' then
  args[#args + 1] = 'MAXLEN'
  args[#args + 1] = '~'
  args[#args + 1] = ARGV[5]
end
args[#args + 1] = '*'
args[#args + 1] = ARGV[1]
args[#args + 1] = ARGV[2]
for i = 6, #ARGV do
  args[#args + 1] = ARGV[i]
end
local id = redis.call('XADD', unpack(args))
redis.call('PUBLISH', ARGV[3], ARGV[4] ~= '' and ARGV[4] or id)
return id

-- Append an envelope to an inbox and PUBLISH its wake-up, only while the session runs (its lead's
-- record says `running`): the look and the write are one step, so a post from outside never
-- lands in a session that finished, or that the bus never knew, between a look and the write
-- (such a write would sit in a finished session's inbox, or make a key that never expires).
-- KEYS[1] the lead's record (a hash), KEYS[2] the inbox (a stream); one hash tag, one slot.
-- ARGV: field, value, channel, payload to publish ('' publishes the new entry's id), then any
-- more field/value pairs for the same entry (an envelope's signature).
-- Returns {status, id}: the record's `status` ('' when it has none) and the new entry's id, or
-- '' when nothing was written.
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' then
  return {status or '', ''}
end
local args = {KEYS[2], '*', ARGV[1], ARGV[2]}
for i = 5, #ARGV do
  args[#args + 1] = ARGV[i]
end
local id = redis.call('XADD', unpack(args))
redis.call('PUBLISH', ARGV[3], ARGV[4] ~= '' and ARGV[4] or id)
return {status, id}

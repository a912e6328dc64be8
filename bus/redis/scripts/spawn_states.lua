-- Where submitted spawn requests stand: for each entry id, 'queued' (in the stream, delivered to
-- no consumer), 'claimed' (in a consumer's pending list) or 'gone' (not in the stream).
-- KEYS[1] the stream; ARGV: the group, then the entry ids. Returns one state per id, in order.
local group = ARGV[1]
local states = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local entry = redis.pcall('XRANGE', KEYS[1], id, id)
  if type(entry) ~= 'table' or entry.err or not entry[1] then
    states[#states + 1] = 'gone'
  else
    local pending = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
    if type(pending) == 'table' and not pending.err and pending[1] then
      states[#states + 1] = 'claimed'
    else
      states[#states + 1] = 'queued'
    end
  end
end
return states

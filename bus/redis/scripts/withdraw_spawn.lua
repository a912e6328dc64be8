-- Withdraw spawn requests no worker has claimed yet (their session ended), each in one step with
-- its check: an entry still in the stream and in no consumer's pending list is deleted, so it is
-- never delivered; one already delivered (running, handed back, or done) is left as it is.
-- KEYS[1] the stream; ARGV: the group, then the entry ids. Returns what was withdrawn, flat:
-- {id, fields, id, fields, ...} (the fields say whose inbox goes with it).
local group = ARGV[1]
local withdrawn = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local pending = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
  local unclaimed
  if type(pending) == 'table' and pending.err then
    -- NOGROUP: no worker ever read the stream, so nothing of it was delivered
    unclaimed = string.sub(pending.err, 1, 7) == 'NOGROUP'
  else
    unclaimed = not pending[1]
  end
  if unclaimed then
    local entry = redis.pcall('XRANGE', KEYS[1], id, id)
    if type(entry) == 'table' and not entry.err and entry[1] then
      redis.call('XDEL', KEYS[1], id)
      withdrawn[#withdrawn + 1] = id
      withdrawn[#withdrawn + 1] = entry[1][2]
    end
  end
end
return withdrawn

-- Renew the lease of entries only where we still hold them: XCLAIM alone would take an entry
-- back from the worker that took it over after our lease lapsed.
-- KEYS[1] the stream; ARGV: the group, our consumer name, then the entry ids. Returns the ids
-- still ours.
local held = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    held[#held + 1] = ARGV[i]
  end
end
return held

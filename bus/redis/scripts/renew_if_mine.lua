-- Renew the lease of entries only where we still hold them: XCLAIM alone would take an entry
-- back from the worker that took it over after our lease lapsed.
-- KEYS[1] the stream; ARGV: the group, our consumer name, then the entry ids. Returns the ids
-- still ours, or nil when the stream's group is gone (a Redis that came back empty): then none
-- is held, and nobody else can claim them either.
local held = {}
for i = 3, #ARGV do
  local p = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if type(p) == 'table' and p.err then
    if string.sub(p.err, 1, 7) == 'NOGROUP' then
      return false
    end
    return error(p)
  end
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    held[#held + 1] = ARGV[i]
  end
end
return held

-- Move entries only where we still hold them, to a consumer with an idle time: a check of
-- which are still ours after our lease lapsed (to us, idle 0) or a hand-back (to
-- `<us>:released`, idle for years: the next claim takes it at once). XCLAIM alone would take an
-- entry back from the worker that took it over after our lease lapsed; and a check racing a
-- hand-back would make the handed-back entries ours again, were they still ours by name.
-- KEYS[1] the stream; ARGV: the group, our consumer name, the consumer to move them to, the idle
-- time to give them (ms), then the entry ids (any order; in ascending order the range read
-- below is no wider than they are). Returns the ids moved, or nil when the stream's group is
-- gone (a Redis that came back empty): then none is held, and nobody else can claim them either.
--
-- Our pending entries between the lowest and the highest id asked are read in one XPENDING
-- range (filtered to our consumer, paged), and the asked ones among them moved in one XCLAIM:
-- about 4 µs an entry, where an XPENDING and an XCLAIM for each entry cost about 10.
local asked = {}
local low_ms, low_seq, high_ms, high_seq
for i = 5, #ARGV do
  local id = ARGV[i]
  asked[id] = true
  local dash = string.find(id, '-', 1, true)
  local ms, seq = tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
  if low_ms == nil or ms < low_ms or (ms == low_ms and seq < low_seq) then
    low_ms, low_seq = ms, seq
  end
  if high_ms == nil or ms > high_ms or (ms == high_ms and seq > high_seq) then
    high_ms, high_seq = ms, seq
  end
end
if low_ms == nil then
  return {}
end
local held = {}
local start = string.format('%.0f-%.0f', low_ms, low_seq)
local last = string.format('%.0f-%.0f', high_ms, high_seq)
local page = #ARGV - 4
while true do
  local p = redis.pcall('XPENDING', KEYS[1], ARGV[1], start, last, page, ARGV[2])
  if type(p) == 'table' and p.err then
    if string.sub(p.err, 1, 7) == 'NOGROUP' then
      return false
    end
    return error(p)
  end
  for _, entry in ipairs(p) do
    if asked[entry[1]] then
      held[#held + 1] = entry[1]
    end
  end
  if #p < page then
    break
  end
  start = '(' .. p[#p][1]
end
if #held > 0 then
  local claim = {KEYS[1], ARGV[1], ARGV[3], 0}
  for _, id in ipairs(held) do
    claim[#claim + 1] = id
  end
  claim[#claim + 1] = 'IDLE'
  claim[#claim + 1] = ARGV[4]
  claim[#claim + 1] = 'JUSTID'
  redis.call('XCLAIM', unpack(claim))
end
return held

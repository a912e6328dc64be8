-- A worker says it serves a pool (or, with a TTL of 0, that it stopped): its announcement is a
-- member of the pool's workers set, scored by when it lapses in the server's own milliseconds
-- (so no two hosts' clocks are compared). Lapsed announcements are dropped on the way, and the
-- set itself expires once the last announcement would have.
-- KEYS[1] the set; ARGV: the announcement (JSON: name and profiles), its TTL in ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ttl > 0 then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return 1

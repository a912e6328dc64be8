-- The live announcements of a pool's workers: those that lapse after now (server time).
-- KEYS[1] the pool's workers set. Returns the announcements (JSON text each).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')

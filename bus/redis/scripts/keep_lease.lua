-- A worker's lease on what it holds of one hash tag's spawn requests: its member of the tag's
-- leases (a sorted set, `<prefix>:leases:{P}` or `<prefix>:{S}:leases`: consumer name -> when
-- its lease lapses, in the server's milliseconds, so no two hosts' clocks are compared). A beat
-- moves that time on; the requests themselves are left alone, so keeping 50,000 agents costs one
-- command, not 50,000 XCLAIMs. One key per tag, declared: it moves with the streams' slot.
-- KEYS[1] the leases; ARGV: our consumer name, the lease in ms.
-- Returns 1 when our lease was still live: nobody can have taken a request of ours since the
-- last beat (a claimant takes only from a consumer whose lease lapsed: claim_spawn.lua). Returns 0
-- when it had lapsed (or never was): it is live again at once, so nothing more can go, and the
-- caller must find out which of its requests are still its own (claim_if_mine.lua) before it
-- trusts any of them again. Lapsed members are dropped on the way; the set expires with its
-- last live lease.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local was = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
if was and tonumber(was) > now then
  return 1
end
return 0

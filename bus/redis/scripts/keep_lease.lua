-- A worker's lease on what it holds of one hash tag's spawn requests: one key,
-- `<wake channel>:lease:<consumer>`, a string with a TTL. A beat sets the TTL again; the entries
-- themselves are left alone, so keeping 50,000 agents costs one command, not 50,000 XCLAIMs.
-- KEYS[1] the lease key; ARGV[1] the lease in ms.
-- Returns 1 when the key was still there: nobody can have taken an entry of ours since the last
-- beat (a claimant takes only from a consumer whose lease key is gone). Returns 0 when it had
-- lapsed: it is set again at once, so nothing more can go, and the caller must find out which of
-- its entries are still its own (claim_if_mine.lua) before it trusts any of them again.
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 1 then
  return 1
end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return 0

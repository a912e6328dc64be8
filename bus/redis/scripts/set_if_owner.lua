-- Merge fields into an agent's record only while it names us its owner: the look and the write
-- in one step, so a worker whose agent was taken over never writes over the new owner's state.
-- KEYS[1] the agent's hash; ARGV[1] the owner we expect, then field/value pairs (none: a look).
-- Returns 1 when the record is ours (written), 0 when it names another owner or none.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
if #ARGV > 1 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
end
return 1

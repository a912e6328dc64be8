-- A session's budget: the check and the count of a model call in one step, so agents in many
-- processes never let more calls through than the cap.
-- KEYS[1] the session's spend hash (fields calls, tokens, max_calls, max_tokens).
-- ARGV[1] the operation:
--   'limits', ARGV[2] max_calls, ARGV[3] max_tokens ('' for no cap): set the caps, keep the counts;
--   'reserve': count one call unless a cap is reached;
--   'record', ARGV[2] tokens: add a finished call's tokens;
--   'read': nothing.
-- Returns {granted (1, or 0 for a refused reserve), calls, tokens, max_calls, max_tokens} after
-- the operation, '' for a cap not set.
local key = KEYS[1]
local op = ARGV[1]
if op == 'limits' then
  local fields = {'max_calls', 'max_tokens'}
  for i = 1, 2 do
    if ARGV[i + 1] ~= '' then
      redis.call('HSET', key, fields[i], ARGV[i + 1])
    else
      redis.call('HDEL', key, fields[i])
    end
  end
elseif op == 'record' then
  redis.call('HINCRBY', key, 'tokens', ARGV[2])
end
local v = redis.call('HMGET', key, 'calls', 'tokens', 'max_calls', 'max_tokens')
local calls = tonumber(v[1]) or 0
local tokens = tonumber(v[2]) or 0
local granted = 1
if op == 'reserve' then
  local max_calls = tonumber(v[3])
  local max_tokens = tonumber(v[4])
  if (max_calls and calls >= max_calls) or (max_tokens and tokens >= max_tokens) then
    granted = 0
  else
    calls = redis.call('HINCRBY', key, 'calls', 1)
  end
end
return {granted, calls, tokens, v[3] or '', v[4] or ''}

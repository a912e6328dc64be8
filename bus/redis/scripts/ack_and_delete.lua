-- XACK and XDEL together: an acked entry leaves the stream, an un-acked one never does, so
-- inboxes need no MAXLEN trimming that could drop un-acked work.
-- KEYS[1] the stream; ARGV: the group, then the entry ids. Returns how many were deleted.
redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
return redis.call('XDEL', KEYS[1], unpack(ARGV, 2))

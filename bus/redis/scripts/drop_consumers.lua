-- Delete the consumers of a group that hold nothing: XGROUP DELCONSUMER drops a consumer's
-- pending entries with it, so the check (pending = 0) and the delete are one step, and an entry
-- delivered between a look and a delete cannot be lost.
-- KEYS: the streams (one Cluster slot: a pool's, or one session's); ARGV: the group, and the
-- least time in ms a consumer must have been idle (a live one read moments ago is left alone).
-- A key that is missing, of another type or without the group is skipped. Returns how many
-- consumers were deleted.
local group, min_idle = ARGV[1], tonumber(ARGV[2])
local deleted = 0

local function field(row, name)
  for i = 1, #row, 2 do
    if row[i] == name then
      return row[i + 1]
    end
  end
  return nil
end

for _, key in ipairs(KEYS) do
  local rows = redis.pcall('XINFO', 'CONSUMERS', key, group)
  if type(rows) == 'table' and not rows.err then
    for _, row in ipairs(rows) do
      if field(row, 'pending') == 0 and (field(row, 'idle') or 0) >= min_idle then
        redis.call('XGROUP', 'DELCONSUMER', key, group, field(row, 'name'))
        deleted = deleted + 1
      end
    end
  end
end
return deleted

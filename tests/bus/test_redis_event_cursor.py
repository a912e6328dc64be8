"""A tail's cursor against the real redis-server: only Redis's refusal of the stream ID itself is
the caller's bad cursor (a ConfigError); any other refusal stays a bus error."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from baton.bus.errors import BusError, ConfigError
from baton.bus.events import SessionStarted
from baton.bus.redis import RedisBus
from baton.testing import RedisServer


@pytest.mark.parametrize(
    "cursor", ["not-a-cursor", "1-2-3", "18446744073709551615-18446744073709551615"]
)
async def test_a_cursor_redis_cannot_read_as_a_stream_id_is_a_config_error(
    redis_server: RedisServer, cursor: str
) -> None:
    async with RedisBus(redis_server.url, prefix="cursor-id") as bus:
        await bus.log.emit(SessionStarted(session="s", agent="lead", task="x"))
        with pytest.raises(ConfigError, match="bad event cursor"):
            await anext(bus.log.tail("s", after=cursor, follow=False))


async def test_another_refusal_during_a_tail_is_a_bus_error_not_a_bad_cursor(
    redis_server: RedisServer,
) -> None:
    async with Redis.from_url(redis_server.url) as admin:
        await admin.set("cursor-type:{s}:events", "not a stream")  # WRONGTYPE for XRANGE
    async with RedisBus(redis_server.url, prefix="cursor-type") as bus:
        with pytest.raises(BusError, match="WRONGTYPE") as raised:
            await anext(bus.log.tail("s", after="0-1", follow=False))
    assert not isinstance(raised.value, ConfigError)

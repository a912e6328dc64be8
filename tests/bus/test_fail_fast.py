"""A bus whose owner has judged it gone (``Bus.fail_fast``, a session past its outage bound)
tries each operation once until one succeeds again: its last writes each spent 1.7 s of retries
on a dead server, and a failing session took 9 s to end after its verdict."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from baton.bus.errors import BusUnreachable
from baton.bus.redis import RedisBus
from baton.testing import RedisServer


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A server of this test's own: killing it disturbs no other test."""
    with RedisServer() as server:
        yield server


def count_attempts(bus: RedisBus, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the core sent an operation's commands (retries included)."""
    core = bus._core
    sent = [0]
    attempt: Callable[..., Awaitable[list[Any]]] = core._attempt

    async def counted(commands: tuple[Any, ...]) -> list[Any]:
        sent[0] += 1
        return await attempt(commands)

    monkeypatch.setattr(core, "_attempt", counted)
    return sent


async def test_failing_fast_tries_once_until_an_operation_succeeds(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with RedisBus(own_redis.url, prefix="fast", attempts=6) as bus:
        sent = count_attempts(bus, monkeypatch)
        own_redis.kill()
        with pytest.raises(BusUnreachable):
            await bus.ping()
        assert sent[0] == 7  # a blip: the first try, then six retries with backoff

        bus.fail_fast()
        sent[0] = 0
        with pytest.raises(BusUnreachable):
            await bus.ping()
        assert sent[0] == 1

        own_redis.start()
        await bus.ping()  # it answers again: back to riding out blips
        own_redis.kill()
        sent[0] = 0
        with pytest.raises(BusUnreachable):
            await bus.ping()
        assert sent[0] == 7

"""An event tail against a Redis that goes away (a server of its own, killed and restarted on the
same port with its AOF): a fault is reported as a fault (``BusUnreachable``, exit 3), never as the
caller's bad cursor (exit 2); :func:`~baton.bus.tail.tail_events` rides the outage out and carries
on right after the last event it handed out; past its bound it ends with ``BusOutage``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator

import anyio
import pytest

from baton.bus.base import LoggedEvent
from baton.bus.errors import BusOutage, BusUnreachable, ConfigError, ExitCode
from baton.bus.events import SessionStarted, TextDelta
from baton.bus.redis import RedisBus
from baton.bus.retry import persist
from baton.bus.tail import tail_events
from baton.testing import RedisServer
from tests.support.outages import retry_logged

SESSION = "s-tail"


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A server of this test's own: killing it disturbs no other test."""
    with RedisServer() as server:
        yield server


def said(text: str) -> TextDelta:
    return TextDelta(session=SESSION, agent="painter", text=text)


async def test_a_tail_that_meets_a_dead_redis_is_unreachable_not_a_bad_cursor(
    own_redis: RedisServer,
) -> None:
    """Before, the tail turned any bus error into ``ConfigError("bad event cursor …")``, so
    ``baton watch`` exited 2 (fix your command line) when Redis had merely gone away."""
    async with RedisBus(own_redis.url, prefix="dead") as bus:
        cursor = await bus.log.emit(SessionStarted(session=SESSION, agent="lead", task="x"))
        own_redis.kill()
        with pytest.raises(BusUnreachable) as raised:
            await anext(bus.log.tail(SESSION, after=cursor, follow=False))
    assert not isinstance(raised.value, ConfigError)
    assert raised.value.exit_code == ExitCode.UNREACHABLE
    assert "bad event cursor" not in str(raised.value)


async def next_of(events: AsyncGenerator[LoggedEvent, None]) -> LoggedEvent:
    with anyio.fail_after(60):
        return await anext(events)


async def test_a_tail_rides_out_an_outage_and_resumes_at_its_cursor(
    own_redis: RedisServer,
) -> None:
    async with RedisBus(own_redis.url, prefix="resume") as bus:
        for text in ("one", "two"):
            await bus.log.emit(said(text))
        events = tail_events(bus, SESSION, outage_s=60)
        seen = [(await next_of(events)).event for _ in range(2)]

        async def read_on() -> None:
            seen.append((await next_of(events)).event)

        with retry_logged(f"tail {SESSION}") as tail_failed, anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(read_on)  # following the log when Redis dies
                own_redis.kill()
                await tail_failed.wait()  # past the bus's own retries: where the tail ended before
                await anyio.to_thread.run_sync(own_redis.start)  # same port, same AOF
                await bus.log.emit(said("three"))
        await events.aclose()
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["one", "two", "three"]


async def test_a_tail_past_its_outage_bound_ends_with_bus_unreachable(
    own_redis: RedisServer,
) -> None:
    async with RedisBus(own_redis.url, prefix="bound") as bus:
        await bus.log.emit(said("one"))
        events = tail_events(bus, SESSION, follow=False, outage_s=1.0)
        own_redis.kill()
        began = anyio.current_time()
        with anyio.fail_after(30), pytest.raises(BusOutage) as raised:
            await anext(events)
        waited = anyio.current_time() - began
    assert "bus unreachable for" in str(raised.value) and "bound of 1 s" in str(raised.value)
    assert raised.value.exit_code == ExitCode.UNREACHABLE
    assert raised.value.waited_s >= 1.0 and waited < 10


async def test_a_bounded_write_gives_up_at_its_bound_and_an_unbounded_one_waits(
    own_redis: RedisServer,
) -> None:
    """The bound is where ``persist`` stops; without one it keeps trying until the bus is back
    (what a worker does), and the write lands."""
    async with RedisBus(own_redis.url, prefix="write") as bus:
        own_redis.kill()
        with anyio.fail_after(30), pytest.raises(BusOutage, match="bus unreachable"):
            await persist(lambda: bus.log.emit(said("lost")), "bounded", outage_s=0.5)
        with retry_logged("unbounded") as write_failed, anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(persist, lambda: bus.log.emit(said("kept")), "unbounded")
                await write_failed.wait()
                await anyio.to_thread.run_sync(own_redis.start)
        logged = [logged.event async for logged in bus.log.tail(SESSION, follow=False)]
    assert [e.text for e in logged if isinstance(e, TextDelta)] == ["kept"]

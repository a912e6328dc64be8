"""An SSE stream of ``baton serve`` across a Redis outage (a server of this test's own, killed and
restarted on the same port with its AOF): the stream stays open and goes on with the next event
once Redis is back; before, the feed failed with the bus's own retries and every stream ended."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from baton.bus.events import SessionFinished, SessionStarted, TextDelta
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.server.helpers import client, serving, stream
from tests.support.outages import retry_logged

SESSION = "s-sse-outage"


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


async def test_an_event_stream_rides_out_a_redis_outage(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    async with RedisBus(own_redis.url, prefix="sse-outage") as bus:
        started = await bus.log.emit(SessionStarted(session=SESSION, agent="lead", task="x"))
        async with serving(bus, tmp_path, bus_outage_s=60) as server, client(server) as http:
            async with stream(http, SESSION) as (response, events):
                assert response.status_code == 200
                assert (await anext(events)).retry is not None
                first = await anext(events)
                # Read by the feed's live tail, which is therefore subscribed before the outage.
                said = await bus.log.emit(TextDelta(session=SESSION, agent="lead", text="hi"))
                second = await anext(events)
                with retry_logged(f"tail {SESSION}") as tail_failed, anyio.fail_after(60):
                    own_redis.kill()
                    await tail_failed.wait()  # the feed met the outage past the bus's retries
                    await anyio.to_thread.run_sync(own_redis.start)  # same port, same AOF
                    finished = SessionFinished(session=SESSION, agent="lead", status="completed")
                    last = await bus.log.emit(finished)
                    rest = [event async for event in events if event.id is not None]
    assert (first.id, first.event) == (started, "session.started")
    assert (second.id, second.event) == (said, "text.delta")
    assert [(event.id, event.event) for event in rest] == [(last, "session.finished")]

"""A whole session (in-process lead, in-process worker, scripted lead model) on a Redis that dies
mid-session: it rides out an outage longer than the ~6 s that used to kill it and completes once
Redis is back (same port, same AOF); past its ``bus_outage_s`` it fails with "bus unreachable".

Each test has a ``redis-server`` of its own, so killing it disturbs no other test. The outage is
begun when the sub-agent is mid-tool and the lead waits for its result.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from baton.api import Session, SessionConfig
from baton.bus.errors import BusOutage
from baton.bus.events import AgentResult, Event, SessionFinished, ToolCalled
from baton.bus.redis import RedisBus
from baton.llm.script import Reply
from baton.testing import RedisServer
from tests.lead.helpers import gated_profile
from tests.support.events import logged_events
from tests.support.models import call, scripted
from tests.support.outages import retry_logged

OLD_LIMIT_S = 6.0
"""How long an outage a session survived before: its event tail died with the bus's own retries
(a few seconds) after its next look at the log (every 5 s)."""


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def config_for(server: RedisServer, gate: anyio.Event, tmp: Path, bound_s: float) -> SessionConfig:
    return SessionConfig(
        task="paint a heron",
        bus_url=server.url,
        profiles=[gated_profile(gate)],
        media_dir=tmp,
        bus_outage_s=bound_s,
        shutdown_grace_s=0.2,
    )


def mid_tool(event: Event) -> bool:
    return isinstance(event, ToolCalled) and event.agent == "slow"


async def test_a_session_rides_out_a_redis_outage_longer_than_the_old_limit(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    gate = anyio.Event()
    config = config_for(own_redis, gate, tmp_path, bound_s=60)
    _, model = scripted(
        [
            call("send_message", to="slow", content="paint a heron", type="task"),
            Reply(text="The painter is on it."),
            Reply(text="Here is the heron."),
        ],
        fallback=False,
    )
    seen: list[Event] = []
    down = anyio.current_time()
    with retry_logged(f"tail {config.session_id}") as tail_failed, anyio.fail_after(120):
        async with model, Session(config, model=model) as session:
            async for event in session.events():
                seen.append(event)
                if mid_tool(event) and not gate.is_set():
                    own_redis.kill()
                    down = anyio.current_time()
                    await tail_failed.wait()  # past the bus's own retries: the old end of it
                    await anyio.sleep(max(0.0, down + OLD_LIMIT_S + 1 - anyio.current_time()))
                    await anyio.to_thread.run_sync(own_redis.start)  # same port, same AOF
                    gate.set()
            result = await session.run()
    assert anyio.current_time() - down > OLD_LIMIT_S
    assert (result.status, result.answer) == ("completed", "Here is the heron.")
    assert session.error is None
    assert [e.agent for e in seen if isinstance(e, AgentResult)] == ["slow"]  # once, not twice
    assert isinstance(seen[-1], SessionFinished) and seen[-1].status == "completed"
    async with RedisBus(own_redis.url) as bus:
        log = await logged_events(bus, session.id)
    assert [e for e in log if isinstance(e, SessionFinished)] == [log[-1]]
    assert [e.agent for e in log if isinstance(e, AgentResult)] == ["slow"]


async def test_a_session_fails_with_bus_unreachable_past_its_outage_bound(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    gate = anyio.Event()  # never set: Redis does not come back while the session runs
    config = config_for(own_redis, gate, tmp_path, bound_s=1.0)
    _, model = scripted(
        [
            call("send_message", to="slow", content="paint a heron", type="task"),
            Reply(text="The painter is on it."),
        ],
        fallback=False,
    )
    seen: list[Event] = []
    with anyio.fail_after(60):
        async with model, Session(config, model=model) as session:
            async for event in session.events():
                seen.append(event)
                if mid_tool(event):
                    own_redis.kill()
            with pytest.raises(BusOutage, match="bus unreachable for") as raised:
                await session.run()
    assert session.error is raised.value
    assert session.result is not None and session.result.status == "failed"
    assert "bus unreachable" in session.result.error
    assert isinstance(seen[-1], SessionFinished) and seen[-1].status == "failed"

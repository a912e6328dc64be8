"""A lead rides out a bus blip as its sub-agents do: Redis dies while the lead is about to read
its inbox, comes back, and the session finishes as if nothing happened."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anyio
import pytest

from baton.bus.events import AgentSpawned, Event
from baton.bus.messages import Envelope
from baton.bus.payloads import ResultReport
from baton.bus.redis import RedisBus
from baton.lead.agent import Lead
from baton.llm.script import Reply
from baton.testing import RedisServer
from tests.support.models import call, scripted

SESSION = "s-blip"


class _UnreachableLogged(logging.Handler):
    """Sets ``event`` once the retry policy logs that the lead's inbox read hit a dead bus."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("read lead: bus unreachable"):
            self.event.set()


@pytest.fixture
def unreachable_logged() -> Iterator[_UnreachableLogged]:
    handler = _UnreachableLogged()
    logger = logging.getLogger("baton.bus.retry")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture
def restarts_redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The shared server, running again after the test whatever happened."""
    yield redis_server
    if redis_server._proc is None:
        redis_server.start()


async def test_lead_rides_out_a_redis_restart_while_waiting_for_results(
    restarts_redis: RedisServer, unreachable_logged: _UnreachableLogged
) -> None:
    server = restarts_redis
    _, model = scripted(
        [
            call("send_message", to="painter", content="paint a heron", type="task"),
            Reply(text="The painter is on it."),
            Reply(text="Here is the heron."),
        ],
        fallback=False,
    )

    async def on_event(event: Event) -> None:
        if isinstance(event, AgentSpawned):  # delegated: the next bus call is the inbox read
            server.kill()

    async with RedisBus(server.url, prefix="lead-blip") as bus:
        # As after the lead's first wait, its inbox is watched: the read after the kill goes
        # straight to Redis (a first read would wait up to 30 s for its SUBSCRIBE to be confirmed).
        assert await bus.read_inbox(SESSION, "lead") == []
        lead = Lead(bus, model, session=SESSION, profiles={"painter": "Paints."}, events=on_event)
        outcomes = []

        async def run() -> None:
            outcomes.append(await lead.run("paint a heron"))

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            with anyio.fail_after(30):
                await unreachable_logged.event.wait()  # past the bus's own retries
            server.start()
            result = Envelope(
                session=SESSION,
                sender="painter",
                recipient="lead",
                type="result",
                content="a heron, painted",
                meta=ResultReport(reason="finished", steps=1).to_meta(),
            )
            await bus.send(result)
    [outcome] = outcomes
    assert (outcome.status, outcome.answer) == ("completed", "Here is the heron.")
    assert lead.roster.agents["painter"].state == "done"
    assert any("a heron, painted" in str(m.get("content")) for m in lead.history)

"""Sessions at once on one server over real Redis: one session ends while its in-process worker is
still starting an agent, and the server and every other session carry on.

A session's in-process worker gives back what it still hosts when the session ends, possibly an
agent that has not read its inbox yet. That give-back used to meet Redis's ``NOGROUP`` (the inbox
had no consumer group) and end the server's task group: every hosted session cancelled and
``baton serve`` exiting 1 (3 of 3 runs with 120 sessions, 4 of 5 with 6). Here the moment is made
certain instead of hoped for: the first agent a worker announces is held in its start until the
worker gives it back.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import anyio

from baton.bus.base import BusOptions
from baton.bus.events import AgentClaimed, Event
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.server.helpers import client, read_all, serving, start_session
from tests.support.parts import before

OTHERS = 6
_prefixes = itertools.count()


class HoldFirstStart(RedisBus):
    """A real Redis bus on which the first agent a worker announces waits in its start until its
    worker gives it back (the wait is cancelled): it never reads its inbox."""

    def __init__(self, url: str) -> None:
        super().__init__(url, BusOptions(), prefix=f"serve{next(_prefixes)}")
        self.holding = anyio.Event()
        self.held_session = ""
        before(self.log, "emit", self._hold)

    async def _hold(self, event: Event) -> None:
        if isinstance(event, AgentClaimed) and not self.holding.is_set():
            self.held_session = event.session
            self.holding.set()
            await anyio.sleep_forever()


async def test_a_session_ending_while_its_agent_starts_leaves_the_server_serving(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    bus = HoldFirstStart(redis_server.url)
    async with bus, serving(bus, tmp_path) as server, client(server) as http:
        statuses: dict[str, str] = {}

        async def run(task: str) -> None:
            session = await start_session(http, task, profiles=["painter"])
            statuses[session] = (await read_all(http, session))[-1].json()["status"]

        async def cancel_held() -> None:
            await bus.holding.wait()
            cancelled = await http.post(f"/sessions/{bus.held_session}/cancel")
            assert cancelled.status_code == 202, cancelled.text

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(run, "paint the held fox")
                group.start_soon(cancel_held)
                for n in range(OTHERS):
                    group.start_soon(run, f"paint heron {n}")
            # The server still serves: a session started after all those ends completes too.
            await run("paint one more pike")
        held = statuses.pop(bus.held_session)
        assert held == "cancelled"
        assert list(statuses.values()) == ["completed"] * (OTHERS + 1), statuses
        assert (await http.get("/healthz")).status_code == 200

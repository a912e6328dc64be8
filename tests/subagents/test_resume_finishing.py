"""A sub-agent whose worker dies while it finishes is finished by the next owner: exit
``finished``, one final result, its ``agent.result`` and ``agent.exited`` logged once.

The chaos suite (``benchmarks/chaos.py --case kill-finishing``) found two holes: a worker killed
after the round that ended its agent was checkpointed, but before the report was recorded, left an
agent that the next owner resumed into waiting for a message that never came (it ended ``idle``,
a minute later); and one killed between logging the exit events and sending the report made the
next owner log them again. The kill here is in-process: the dying bus raises a ``BaseException``
at the chosen step, so nothing after it is written, as with ``kill -9``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import anyio
import pytest

from baton.bus.base import BusOptions
from baton.bus.events import AgentExited, AgentProgress, AgentResult, Event
from baton.bus.messages import Envelope
from baton.bus.redis import RedisBus
from baton.llm.script import Reply
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, profile, seated, task
from tests.subagents.test_loop import assert_one_final, exit_events
from tests.support.models import scripted
from tests.support.parts import before

KillPoint = Literal["record", "send"]
_prefixes = itertools.count()


class Killed(BaseException):
    """The worker died here: nothing catches it, nothing after it is written."""


class Dying(RedisBus):
    """A real Redis bus whose process dies at one step of the final bookkeeping: ``record``
    (writing the ``finishing`` state, i.e. just after the round that ended the agent was
    checkpointed) or ``send`` (sending the final result, i.e. just after the exit events)."""

    def __init__(self, url: str, options: BusOptions, *, prefix: str, at: KillPoint) -> None:
        super().__init__(url, options, prefix=prefix)
        self.at = at
        before(self.records, "set_agent", self._record)
        before(self.inboxes, "send", self._send)

    async def _record(
        self, session: str, agent: str, fields: Mapping[str, str], **_: object
    ) -> None:
        if self.at == "record" and fields.get("status") == "finishing":
            raise Killed

    async def _send(self, envelope: Envelope) -> None:
        if self.at == "send" and envelope.type == "result":
            raise Killed


@pytest.mark.parametrize("at", ["record", "send"])
async def test_an_agent_killed_while_finishing_is_finished_once_by_the_next_owner(
    redis_server: RedisServer, tmp_path: Path, at: KillPoint
) -> None:
    server, model = scripted([Reply(text="All done.")], fallback=False)
    keys = f"finishing{next(_prefixes)}x{os.getpid()}"
    options = BusOptions(lease_s=60)
    dying = Dying(redis_server.url, options, prefix=keys, at=at)
    heir = RedisBus(redis_server.url, options, prefix=keys)
    # Idle after 30 s: an heir that waits for a new message fails the 10 s bound below.
    writer = profile(idle_timeout_s=30.0)
    async with dying, heir, model:
        await heir.inboxes.send(task("writer", "write it"))
        first = seated(dying, writer, model, "writer", tmp_path, spawn_id="sp1", owner="w1/1")
        with pytest.raises(Killed):
            await first.run()
        state = await heir.records.agent(SESSION, "writer")
        assert state["status"] == ("running" if at == "record" else "finishing")
        results, _ = await exit_events(heir, "writer")
        assert len(results) == (0 if at == "record" else 1)

        second = seated(heir, writer, model, "writer", tmp_path, spawn_id="sp1", owner="w2/1")
        with anyio.fail_after(10):
            assert await second.run() == "finished"
        assert second.phase.value == "exited"
        assert len(server.requests) == 1, "the heir ran the finished agent again"
        content = await assert_one_final(heir, "writer", "finished", media=0)
        assert content == "All done."
        assert (await heir.records.agent(SESSION, "writer"))["status"] == "exited"


async def test_emit_once_appends_each_mark_once(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        events: list[Event] = [
            AgentResult(session=SESSION, agent="writer", content="done"),
            AgentExited(session=SESSION, agent="writer", reason="finished"),
        ]
        assert await bus.log.emit_once(SESSION, "writer", events, mark="final-1")
        assert not await bus.log.emit_once(SESSION, "writer", events, mark="final-1")
        await bus.log.emit(AgentProgress(session=SESSION, agent="writer", content="again"))
        assert await bus.log.emit_once(SESSION, "writer", events, mark="final-2")  # a new run
        logged = [e.event.type async for e in bus.log.tail(SESSION, follow=False)]
        exit_pair = ["agent.result", "agent.exited"]
        assert logged == [*exit_pair, "agent.progress", *exit_pair]
        assert (await bus.records.agent(SESSION, "writer"))["logged"] == "final-2"

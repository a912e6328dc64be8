"""A worker told to give its agents back stops even while the bus is out.

An agent's start (announcing it, then restoring its state) retries through bus faults. It used to
run outside the agent's cancel scope, so ``give_back_now()`` during an outage could not reach it
and the worker's shutdown waited for the outage to end. The memory bus here fails one operation on
demand, so the outage hits exactly the step under test while the give-back itself still works.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from baton.bus.base import BusOptions
from baton.bus.errors import BusUnreachable
from baton.bus.memory import MemoryBus
from baton.bus.messages import SpawnRequest
from baton.subagents.loop import AgentParts
from baton.subagents.worker import Worker
from tests.subagents.helpers import SESSION, profile
from tests.support.models import scripted
from tests.support.parts import before

PROFILES = {"painter": profile("generate_image", name="painter")}


class Outage(MemoryBus):
    """A memory bus on which one operation (``emit`` or ``get_agent_state``) fails with
    ``BusUnreachable`` while ``down`` is set; ``failed`` is set at the first such failure."""

    def __init__(self, options: BusOptions, failing: str) -> None:
        super().__init__(options)
        self.failing = failing
        self.down = False
        self.failed = anyio.Event()
        before(self.log, "emit", self._cut_off("emit"))
        before(self.records, "agent", self._cut_off("get_agent_state"))
        before(self.records, "set_agent", self._cut_off("set_agent_state"))

    def _cut_off(self, operation: str) -> Callable[..., Awaitable[None]]:
        async def cut_off(*args: object, **kwargs: object) -> None:
            if self.down and operation == self.failing:
                self.failed.set()
                raise BusUnreachable(self.url, f"{operation} cut off by the test")

        return cut_off


@pytest.mark.parametrize(
    "failing",
    [
        "emit",  # announcing the agent (the worker's AgentClaimed)
        "get_agent_state",  # loading its checkpoint
        "set_agent_state",  # claiming it in its state
    ],
)
async def test_give_back_now_reaches_an_agent_starting_in_an_outage(
    tmp_path: Path, failing: str
) -> None:
    _, model = scripted()
    bus = Outage(BusOptions(lease_s=60), failing)  # no lease lapses during the test
    lead_bus = bus.peer("lead")
    async with bus, lead_bus, model:
        worker = Worker(bus, PROFILES, lambda p: model, parts=AgentParts(media_dir=tmp_path))
        async with anyio.create_task_group() as group:
            await group.start(worker.run)
            bus.down = True
            await lead_bus.spawns.submit(
                SpawnRequest(session=SESSION, agent="a1", profile="painter")
            )
            with anyio.fail_after(10):
                await bus.failed.wait()  # the agent's start is retrying through the outage
            assert worker.hosted == 1
            worker.give_back_now()
            try:
                with anyio.fail_after(10):
                    await worker.stopped.wait()
            finally:
                bus.down = False  # a stop that hung ends now, so the failure is reported
        assert worker.claimed == 1 and worker.finished == 0 and worker.hosted == 0
        claim = await lead_bus.claims.claim(worker.queue)  # given back: at once, not after a lease
        assert claim is not None and claim.request.agent == "a1"

"""An embedded worker stops within its shutdown timeout while Redis is down, and nothing is lost.

Its agent waits for a human's approval when Redis dies. The drain lets the round run, then gives
the agent back; with the bus gone neither the turn's last events nor the hand-back can be written,
so the worker cuts them at its deadline (:mod:`baton.subagents.stopping`). Once Redis is back,
another worker takes the agent over when its lease lapses and it asks again.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from baton.bus.base import BusOptions, LoggedEvent
from baton.bus.events import ApprovalRequested
from baton.bus.messages import SpawnRequest
from baton.bus.redis import RedisBus
from baton.subagents.loop import AgentParts
from baton.subagents.worker import Worker, WorkerLimits
from baton.testing import RedisServer
from tests.subagents.helpers import SESSION, profile, task
from tests.support.models import scripted
from tests.support.tools import publish

PROFILES = {"publisher": profile(publish, name="publisher")}
LEASE_S = 2.0
SHUTDOWN_S = 1.0
SLACK_S = 4.0
"""What a loaded machine may add to the deadline (the cut's unwinding, the bus closing)."""


async def _asked(bus: RedisBus, after: str | None = None) -> LoggedEvent:
    """The next ``ApprovalRequested`` of the session (after ``after``)."""
    with anyio.fail_after(30):
        async for logged in bus.log.tail(SESSION, after=after):
            if isinstance(logged.event, ApprovalRequested):
                return logged
    raise AssertionError("the event log ended")


async def test_a_drain_ends_on_time_with_redis_down_and_the_agent_resumes_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, model = scripted()
    with RedisServer() as redis:  # of its own: it is killed
        lead = RedisBus(redis.url, BusOptions(lease_s=LEASE_S), prefix="stop")
        async with lead, model:
            await lead.inboxes.send(task("publisher", "publish the news"))
            await lead.spawns.submit(
                SpawnRequest(session=SESSION, agent="publisher", profile="publisher")
            )
            first = RedisBus(redis.url, BusOptions(lease_s=LEASE_S), prefix="stop")
            async with first:
                worker = Worker(
                    first,
                    PROFILES,
                    lambda p: model,
                    parts=AgentParts(media_dir=tmp_path),
                    limits=WorkerLimits(shutdown_timeout_s=SHUTDOWN_S),
                )
                with caplog.at_level(logging.WARNING, "baton.subagents.worker"):
                    async with anyio.create_task_group() as host:
                        await host.start(worker.run)
                        asked = await _asked(lead)
                        redis.kill()
                        began = anyio.current_time()
                        worker.drain()
                        with anyio.fail_after(SHUTDOWN_S + SLACK_S):
                            await worker.stopped.wait()
                        took = anyio.current_time() - began
                assert SHUTDOWN_S - 0.1 <= took < SHUTDOWN_S + SLACK_S
                assert worker.hosted == 0 and worker.finished == 0
                said = " ".join(r.getMessage() for r in caplog.records)
                assert f"left for another worker, which resumes them once their leases lapse " \
                       f"(within 2 s): {SESSION}/publisher" in said  # fmt: skip

            redis.start()  # same port, same data (AOF)
            heir = RedisBus(redis.url, BusOptions(lease_s=LEASE_S), prefix="stop")
            other = Worker(
                heir,
                PROFILES,
                lambda p: model,
                parts=AgentParts(media_dir=tmp_path),
                limits=WorkerLimits(shutdown_timeout_s=SHUTDOWN_S),
            )
            async with heir, other:
                again = await _asked(lead, after=asked.cursor)  # resumed once the lease lapsed
                assert again.event.agent == "publisher" and other.claimed == 1

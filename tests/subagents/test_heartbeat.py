"""The worker's heartbeat when lease renewals fail: the worker keeps its agents and its task group.

A renewal that gets no answer says nothing about who holds a lease. It used to crash the worker
(``held`` unbound on the first failure) or, after an earlier success, judge the leases by that
stale answer and stop every agent claimed since as "taken over". A refusal is no answer either:
a ``READONLY`` reply from a replica during a failover (a ``RedisRefused``) used to escape the
heartbeat and cancel every agent.

The first test makes the failure deterministic with a memory bus whose ``renew_spawn`` fails on
demand, so it can place a failure before the first successful renewal and between a claim and the
next success. The second makes the fault real: the Redis server is killed under a working worker
and started again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from baton.bus.base import BusOptions
from baton.bus.errors import BusError, BusUnreachable
from baton.bus.events import AgentClaimed
from baton.bus.memory import MemoryBus
from baton.bus.messages import SpawnRequest
from baton.bus.redis.adapter import RedisRefused
from baton.llm.types import ChatModel
from baton.subagents.loop import AgentParts
from baton.subagents.worker import RENEW_SLICE, Worker, WorkerLimits
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, Lead, profile, task
from tests.support.events import wait_for_event
from tests.support.models import scripted
from tests.support.parts import before

PROFILES = {"painter": profile("generate_image", name="painter")}


def spawn(agent: str) -> SpawnRequest:
    return SpawnRequest(session=SESSION, agent=agent, profile="painter")


def unreachable(url: str) -> BusError:
    """What a heartbeat gets from a bus it cannot reach."""
    return BusUnreachable(url, "renewals cut off by the test")


def read_only(url: str) -> BusError:
    """What a heartbeat gets from a replica during a failover (as ``refusal`` types it)."""
    return RedisRefused("READONLY", "READONLY You can't write against a read only replica.")


class FlakyRenewals(MemoryBus):
    """A memory bus whose lease renewals fail with ``failure(url)`` while ``down`` is set; every
    renewal is recorded, so a test can wait for a failed or a successful one covering given
    agents."""

    def __init__(
        self, options: BusOptions, failure: Callable[[str], BusError] = unreachable
    ) -> None:
        super().__init__(options)
        self.failure = failure
        self.down = False
        self.renewals: list[tuple[int, bool]] = []
        """(how many receipts it covered, whether it failed), in order."""
        self._renewed = anyio.Event()
        before(self.claims, "renew", self._renewal)

    async def _renewal(self, receipts: Sequence[str]) -> None:
        failed = self.down
        self.renewals.append((len(receipts), failed))
        self._renewed.set()
        self._renewed = anyio.Event()
        if failed:
            raise self.failure(self.url)

    async def until_renewal(self, *, covering: int, failed: bool, timeout: float = 10.0) -> None:
        """Wait for a renewal from now on of ``covering`` receipts that failed (or not)."""
        seen = len(self.renewals)
        with anyio.fail_after(timeout):
            while (covering, failed) not in self.renewals[seen:]:
                await self._renewed.wait()


def beating_worker(
    bus: MemoryBus, model: ChatModel, media: Path, *, renew_slice: int = RENEW_SLICE
) -> Worker:
    """A worker of the painter profile whose heartbeat beats every 20 ms."""
    return Worker(
        bus,
        PROFILES,
        lambda p: model,
        parts=AgentParts(media_dir=media),
        limits=WorkerLimits(heartbeat_s=0.02, renew_slice=renew_slice),
    )


@pytest.mark.parametrize("failure", [unreachable, read_only])
async def test_failed_renewals_keep_every_agent(
    tmp_path: Path, failure: Callable[[str], BusError]
) -> None:
    _, model = scripted()
    bus = FlakyRenewals(BusOptions(lease_s=60), failure)  # no lease lapses during the test
    lead_bus = bus.peer("lead")
    lead = Lead(lead_bus)
    async with bus, lead_bus, model:
        worker = beating_worker(bus, model, tmp_path)
        async with worker:
            bus.down = True  # the very first renewal fails
            await lead_bus.spawns.submit(spawn("a1"))
            await bus.until_renewal(covering=1, failed=True)
            bus.down = False
            await bus.until_renewal(covering=1, failed=False)
            bus.down = True  # a1 renewed, then b1 claimed and no renewal answered since
            await lead_bus.spawns.submit(spawn("b1"))
            await bus.until_renewal(covering=2, failed=True)
            await bus.until_renewal(covering=2, failed=True)
            bus.down = False
            await bus.until_renewal(covering=2, failed=False)
            assert worker.hosted == 2 and lead.results == []
            await lead_bus.inboxes.send(task("a1", "paint an apple"))
            await lead_bus.inboxes.send(task("b1", "paint a bee"))
            results = await lead.until_results(2, timeout=20)
        assert sorted(r.sender for r in results) == ["a1", "b1"]
        assert all(r.meta["reason"] == "finished" for r in results)
        assert worker.claimed == 2 and worker.finished == 2


async def test_a_beat_renews_in_slices(tmp_path: Path) -> None:
    """A beat renews its leases ``renew_slice`` at a time, one call after the other, so grouping
    and sorting 50,000 receipts never holds the worker's event loop at once (the dispatch p99)."""
    _, model = scripted()
    bus = FlakyRenewals(BusOptions(lease_s=60))
    lead_bus = bus.peer("lead")
    async with bus, lead_bus, model:
        worker = beating_worker(bus, model, tmp_path, renew_slice=2)
        async with worker:
            for agent in ("a1", "b1", "c1"):
                await lead_bus.spawns.submit(spawn(agent))
            with anyio.fail_after(10):
                while worker.hosted < 3:
                    await bus.until_renewal(covering=1, failed=False)
            seen = len(bus.renewals)
            await bus.until_renewal(covering=1, failed=False)  # a whole beat of the three
            beat = bus.renewals[seen:]
        assert beat[-2:] == [(2, False), (1, False)]
        assert all(covered <= 2 for covered, _ in bus.renewals)


class _Records(logging.Handler):
    """Sets an event when a log record's message contains a text."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.seen = anyio.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.messages.append(message)
        if self.text in message:
            self.seen.set()


@contextmanager
def watching(logger: str, text: str) -> Iterator[_Records]:
    handler = _Records(text)
    log = logging.getLogger(logger)
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def spawned(agent: str) -> Callable[[object], bool]:
    return lambda e: isinstance(e, AgentClaimed) and e.agent == agent


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_worker_rides_out_redis_down_across_heartbeats(
    make_bus: BusFactory, redis_server: RedisServer, tmp_path: Path
) -> None:
    _, model = scripted()
    with watching("baton.subagents.worker", "heartbeat of") as records:
        async with make_bus(lease_s=10) as bus, make_bus(lease_s=10) as lead_bus, model:
            lead = Lead(lead_bus)
            worker = Worker(
                bus,
                PROFILES,
                lambda p: model,
                parts=AgentParts(media_dir=tmp_path),
                limits=WorkerLimits(heartbeat_s=0.2),
            )
            async with worker:
                await lead_bus.spawns.submit(spawn("a1"))
                await wait_for_event(lead_bus, SESSION, spawned("a1"))
                redis_server.kill()
                try:
                    with anyio.fail_after(30):
                        await records.seen.wait()  # a renewal failed: the server is gone
                finally:
                    redis_server.start()  # same port, same AOF: the claims are still there
                assert worker.hosted == 1
                await lead_bus.spawns.submit(spawn("b1"))
                await wait_for_event(lead_bus, SESSION, spawned("b1"))
                await lead_bus.inboxes.send(task("a1", "paint an apple"))
                await lead_bus.inboxes.send(task("b1", "paint a bee"))
                results = await lead.until_results(2, timeout=40)
            assert sorted(r.sender for r in results) == ["a1", "b1"]
            assert worker.claimed == 2 and worker.finished == 2
    assert not [m for m in records.messages if "lost the lease" in m]

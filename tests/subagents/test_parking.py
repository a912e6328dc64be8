"""Idle agents parked (subagents/parking.py): a worker holds each as a callback on its inbox's
wake-up and a timer, not as a task, and it still does what a waiting agent does: it answers the
message that comes, looks at its inbox again at least once a slice (a lost wake-up costs a
slice, never the message), leaves ``idle`` at its deadline, and is given back at once by a
stopping worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from baton.bus.base import SpawnQueue
from baton.bus.events import AgentExited
from baton.bus.messages import DEFAULT_POOL, SpawnRequest
from baton.bus.redis import RedisBus
from baton.subagents.loop import AgentParts
from baton.subagents.profiles import Profile
from baton.subagents.worker import Worker, WorkerLimits
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, Lead, profile, task
from tests.support.events import logged_events
from tests.support.models import scripted

PAINTERS = {"painter": profile("generate_image", name="painter")}


def spawn(agent: str) -> SpawnRequest:
    return SpawnRequest(session=SESSION, agent=agent, profile="painter")


async def until(worker: Worker, parked: int, hosted: int | None = None) -> None:
    """Until ``parked`` of the worker's agents are parked (and ``hosted`` hosted, if given)."""
    with anyio.fail_after(20):
        while worker.parked != parked or (hosted is not None and worker.hosted != hosted):
            await worker._changed().wait()


def hosting(bus: object, tmp_path: Path, profiles: dict[str, Profile], **limits: float) -> Worker:
    _, model = scripted()
    return Worker(
        bus,  # type: ignore[arg-type]
        profiles,
        lambda p: model,
        parts=AgentParts(media_dir=tmp_path),
        limits=WorkerLimits(**limits),  # type: ignore[arg-type]
    )


async def test_idle_agents_hold_no_task_and_each_answers_what_is_sent_to_it(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, make_bus() as lead_bus:
        lead = Lead(lead_bus)
        async with hosting(bus, tmp_path, PAINTERS) as worker:
            tasks_before = len(asyncio.all_tasks())
            for n in range(20):
                await lead_bus.spawns.submit(spawn(f"a{n}"))
            await until(worker, parked=20, hosted=20)
            # Waiting in tasks, twenty agents held twenty tasks more.
            assert len(asyncio.all_tasks()) - tasks_before < 5
            await lead_bus.inboxes.send(task("a7", "paint an apple"))
            (result,) = await lead.until_results(1)
            assert result.sender == "a7" and result.meta["reason"] == "finished"
            await until(worker, parked=19, hosted=19)  # it left; the others stay parked


async def test_a_parked_agent_leaves_idle_at_its_deadline(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    profiles = {"painter": profile("generate_image", name="painter", idle_timeout_s=2.0)}
    async with make_bus() as bus, make_bus() as lead_bus:
        lead = Lead(lead_bus)
        async with hosting(bus, tmp_path, profiles) as worker:
            await lead_bus.spawns.submit(spawn("a1"))
            await until(worker, parked=1)
            (result,) = await lead.until_results(1, timeout=20)
            assert result.meta["reason"] == "idle"
            await until(worker, parked=0, hosted=0)


async def test_a_stopping_worker_gives_a_parked_agent_back_at_once(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """Held by nothing that waits, a parked agent must be told: it used to be the wait that a
    drain interrupted. The stop's own clock (30 s here) would give it back only at its end."""
    async with make_bus() as bus, make_bus() as lead_bus, make_bus() as other:
        lead = Lead(lead_bus)
        worker = hosting(bus, tmp_path, PAINTERS, shutdown_timeout_s=30.0)
        async with worker:
            await lead_bus.spawns.submit(spawn("a1"))
            await until(worker, parked=1)
            worker.drain()
            with anyio.fail_after(10):
                await worker.stopped.wait()
        assert worker.finished == 0 and lead.results == []
        queue = SpawnQueue.of_pool(DEFAULT_POOL, PAINTERS)
        claim = await other.claims.claim(queue, timeout=5)  # given back: at once claimable
        assert claim is not None and claim.request.agent == "a1"
        log = await logged_events(lead_bus, SESSION)
        assert not [e for e in log if isinstance(e, AgentExited)]


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_a_message_whose_wake_up_was_lost_is_found_at_the_next_look(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """Wake-ups are hints: an entry added with no PUBLISH (a wake-up lost on the way) reaches a
    parked agent at its next look at the inbox, as it reached a waiting one. The look here is
    the one at its idle deadline (2 s; the once-a-minute look is the same timer): it reads
    before it leaves, finds the task and does it."""
    profiles = {"painter": profile("generate_image", name="painter", idle_timeout_s=2.0)}
    async with make_bus() as bus, make_bus() as lead_bus:
        assert isinstance(lead_bus, RedisBus)
        lead = Lead(lead_bus)
        async with hosting(bus, tmp_path, profiles) as worker:
            await lead_bus.spawns.submit(spawn("a1"))
            await until(worker, parked=1)
            silent = task("a1", "paint an apple").to_json()
            await lead_bus._core.one("XADD", lead_bus.keys.inbox(SESSION, "a1"), "*", "msg", silent)
            (result,) = await lead.until_results(1, timeout=20)
            assert result.sender == "a1" and result.meta["reason"] == "finished"

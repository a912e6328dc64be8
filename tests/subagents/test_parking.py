"""Idle agents parked (subagents/parking.py): a worker holds each as a callback on its inbox's
wake-up and a timer, not as a task, and it still does what a waiting agent does: it answers the
message that comes, looks at its inbox again at least once a slice (a lost wake-up costs a
slice, never the message), leaves ``idle`` at its deadline, and is given back at once by a
stopping worker."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from baton.bus.base import Bus, SpawnQueue
from baton.bus.events import AgentExited
from baton.bus.messages import DEFAULT_POOL, SpawnRequest
from baton.bus.redis import RedisBus
from baton.subagents.loop import AgentParts, SubAgent
from baton.subagents.parking import Parking
from baton.subagents.profiles import Profile
from baton.subagents.worker import Worker, WorkerLimits
from tests.bus.test_unsubscribe import subscribed
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
            # CPython shares an instance dict's keys with the class's other instances only up
            # to 30 attributes; one more made each idle agent's dict 1.3 KiB larger (benchmarks
            # /scale.py: 5.7 -> 6.8 KiB an agent), so a parked agent stays below that.
            assert max(len(vars(agent)) for agent in worker._hosted.values()) < 30
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


class Looks:
    """A spy on ``bus.inboxes.holding`` (it only counts): the inboxes each minute look asked
    about, by agent name."""

    def __init__(self, bus: Bus) -> None:
        self.batches: list[list[str]] = []
        self._answered = anyio.Event()
        self._holding = bus.inboxes.holding
        bus.inboxes.holding = self._counted  # type: ignore[method-assign]

    async def _counted(self, inboxes: Sequence[tuple[str, str]]) -> list[bool]:
        held = await self._holding(inboxes)
        self.batches.append([name for _, name in inboxes])
        self._answered.set()
        self._answered = anyio.Event()
        return held

    def of(self, name: str) -> int:
        """How many looks asked about ``name``'s inbox."""
        return sum(batch.count(name) for batch in self.batches)

    async def until(self, done: Callable[[], bool]) -> None:
        with anyio.fail_after(20):
            while not done():
                await self._answered.wait()


class StandIn:
    """What the lot reads of a parked agent: whose inbox, when to look, when it leaves idle."""

    def __init__(self, name: str, *, look_s: float, idle_s: float) -> None:
        now = anyio.current_time()
        self.session, self.name, self.look_s = SESSION, name, look_s
        self.wake_at, self.idle_deadline = now + look_s, now + idle_s


async def test_a_stopping_worker_gives_its_parked_agents_back_together(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """Resumed one by one at a stop, 12,500 parked agents a worker each cost a task and a few
    round trips, and over half missed the give-back's bound (issue 24, 100,000 agents): their
    requests waited a lease before anyone could resume them. None is resumed now: their inboxes
    and requests go back in a few operations for all, and each request is claimable at once."""
    async with make_bus() as bus, make_bus() as lead_bus, make_bus() as other:
        worker = hosting(bus, tmp_path, PAINTERS, shutdown_timeout_s=30.0)
        handed: list[int] = []
        hand_back_all = bus.inboxes.hand_back_all

        async def counted(inboxes: Sequence[tuple[str, str]]) -> None:
            handed.append(len(inboxes))
            await hand_back_all(inboxes)

        bus.inboxes.hand_back_all = counted  # type: ignore[method-assign]  # a spy: it counts
        resumed: list[str] = []
        resume = worker._resume

        async def spied(ticket: Any) -> None:
            resumed.append(ticket.agent.name)
            await resume(ticket)

        worker._resume = spied  # type: ignore[method-assign]
        agents = [f"a{n}" for n in range(30)]
        async with worker:
            for agent in agents:
                await lead_bus.spawns.submit(spawn(agent))
            await until(worker, parked=30, hosted=30)
            worker.drain()
            with anyio.fail_after(10):
                await worker.stopped.wait()
        assert resumed == [] and handed == [30] and worker.finished == 0
        queue = SpawnQueue.of_pool(DEFAULT_POOL, PAINTERS)
        claimed: list[str] = []
        for _ in agents:  # given back: each claimable at once
            claim = await other.claims.claim(queue, timeout=5)
            assert claim is not None, claimed
            claimed.append(claim.request.agent)
        assert sorted(claimed) == sorted(agents)
        assert await subscribed(bus, SESSION) == set()


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_the_minute_looks_are_one_question_for_many_and_resume_only_who_holds_a_message(
    make_bus: BusFactory,
) -> None:
    """Resuming every parked agent once a minute to read an empty inbox cost a task and a read
    round trip each (200 a second at 12,500 agents a worker). The due looks are asked about
    together (``Inboxes.holding``): an agent stays parked while its inbox holds nothing, a lost
    wake-up's message resumes its agent at the next look, a wake-up at once, the idle deadline
    always."""
    async with make_bus() as bus, make_bus() as lead_bus:
        assert isinstance(lead_bus, RedisBus)
        parking: Parking[str] = Parking(bus)
        resumed: list[str] = []
        came = anyio.Event()

        def resume(name: str) -> None:
            resumed.append(name)
            came.set()

        spy = Looks(bus)

        async def looks(at_least: int) -> None:
            await spy.until(lambda: sum(map(len, spy.batches)) >= at_least)

        async with anyio.create_task_group() as group:
            group.start_soon(parking.run, resume)
            for n in range(30):
                agent = StandIn(f"a{n}", look_s=0.05, idle_s=3.0 if n == 29 else 60.0)
                assert await bus.inboxes.read(SESSION, agent.name) == []  # as an agent, then
                parking.park(agent.name, cast(SubAgent, agent), agent.name)
            await looks(30 * 3)  # three rounds of looks at thirty empty inboxes
            assert resumed == [] and len(parking) == 30
            assert max(map(len, spy.batches)) > 1  # due together, asked together
            silent = task("a7", "paint an apple").to_json()  # added with no wake-up
            await lead_bus._core.one("XADD", lead_bus.keys.inbox(SESSION, "a7"), "*", "msg", silent)
            with anyio.fail_after(10):
                await came.wait()
            assert resumed == ["a7"]
            came = anyio.Event()
            await lead_bus.inboxes.send(task("a3", "paint a pear"))  # woken: at once
            with anyio.fail_after(10):
                await came.wait()
            assert resumed == ["a7", "a3"]
            with anyio.fail_after(10):  # a29's idle deadline, 3 s after it parked
                while "a29" not in resumed:
                    came = anyio.Event()
                    await came.wait()
            taken = parking.take_all()  # a stopping worker's: handed over, none resumed
            assert len(parking) == 0
            assert sorted(resumed + taken) == sorted(f"a{n}" for n in range(30))
            last = StandIn("b", look_s=60.0, idle_s=60.0)
            assert await bus.inboxes.read(SESSION, last.name) == []
            parking.park(last.name, cast(SubAgent, last), last.name)
            came = anyio.Event()
            await lead_bus.inboxes.send(task("a5", "paint a plum"))  # taken: wakes nobody
            await lead_bus.inboxes.send(task("b", "paint a fig"))  # woken after a5's
            with anyio.fail_after(10):
                await came.wait()
            group.cancel_scope.cancel()
        assert resumed == ["a7", "a3", "a29", "b"]


async def test_parked_agents_share_one_event_loop_timer_and_a_stale_time_looks_at_nobody(
    make_bus: BusFactory,
) -> None:
    """A timer per parked agent was an ``asyncio.TimerHandle`` made anew at every minute look,
    which the garbage collector tracks and which outlived its young generations: 50,000 agents
    a worker left some 100,000 such objects in the old generation a minute, and its full passes
    walked them (140-260 ms each, at 100,000 agents). Their times are one heap under one timer
    now. An agent woken and parked again looks at its new time, never at the old one's."""
    async with make_bus() as bus:
        parking: Parking[str] = Parking(bus)
        spy = Looks(bus)
        resumed: list[str] = []

        async def park(name: str, look_s: float) -> None:
            agent = StandIn(name, look_s=look_s, idle_s=60.0)
            assert await bus.inboxes.read(SESSION, agent.name) == []  # as an agent, then
            parking.park(agent.name, cast(SubAgent, agent), agent.name)

        async def looks(at: str, times: int) -> None:
            await spy.until(lambda: spy.of(at) >= times)

        async with anyio.create_task_group() as group:
            group.start_soon(parking.run, resumed.append)
            for n in range(200):
                await park(f"a{n}", look_s=0.05)
            await park("late", look_s=0.05)
            await looks("a0", 2)
            loop = asyncio.get_running_loop()
            timers = [
                handle
                for handle in gc.get_objects()
                if isinstance(handle, asyncio.TimerHandle)
                and not handle.cancelled()
                and getattr(getattr(handle, "_callback", None), "__self__", None) is parking
                and handle.when() >= loop.time() - 1
            ]
            assert len(timers) <= 1, len(timers)
            parking.release("late")  # woken; its time in the heap is stale from now on
            await park("late", look_s=60.0)  # parked again, to look a minute on
            looked_late = spy.of("late")
            await looks("a0", spy.of("a0") + 3)  # its old time came and went
            assert spy.of("late") == looked_late
            assert resumed == ["late"]
            group.cancel_scope.cancel()

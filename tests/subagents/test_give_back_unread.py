"""A worker that gives back an agent, whatever state its inbox is in, stops cleanly and never takes
its host down with it.

``baton serve`` died (every hosted session cancelled) when a session's in-process worker gave back
an agent that had not read its inbox yet: ``release_inbox`` met a stream without a consumer group
and Redis's ``NOGROUP`` escaped into the server's task group. The same holds for every refusal in
the give-back path (a Redis that came back empty): what cannot be handed back is recovered from its
lease, and the failure stays that agent's.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from baton.bus.base import BusOptions
from baton.bus.errors import BusError
from baton.bus.events import AgentClaimed, Event, RoundEnded
from baton.bus.memory import MemoryBus
from baton.bus.messages import Envelope, SpawnRequest
from baton.bus.redis import RedisBus
from baton.llm.script import Json, Reply, ScriptItem
from baton.subagents.loop import AgentParts, SubAgent
from baton.subagents.worker import Worker
from baton.testing import RedisServer
from tests.subagents.helpers import SESSION, profile, task
from tests.support.events import wait_for_event
from tests.support.models import call, scripted
from tests.support.parts import before

PROFILES = {"painter": profile("generate_image", "summarise", name="painter")}
PAINTER = SpawnRequest(session=SESSION, agent="a1", profile="painter")
_prefixes = itertools.count()


def prefix() -> str:
    return f"giveback{next(_prefixes)}x{os.getpid()}"


class AnnounceGate(RedisBus):
    """A real Redis bus on which announcing a hosted agent (the worker's ``AgentClaimed``) waits
    until cancelled: the agent is then stopped before it ever read its inbox."""

    def __init__(self, url: str, options: BusOptions, *, prefix: str) -> None:
        super().__init__(url, options, prefix=prefix)
        self.announcing = anyio.Event()
        before(self.log, "emit", self._gate)

    async def _gate(self, event: Event) -> None:
        if isinstance(event, AgentClaimed):
            self.announcing.set()
            await anyio.sleep_forever()


async def test_an_agent_given_back_before_its_first_read_leaves_the_host_running(
    redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, model = scripted()
    keys = prefix()
    # No lease lapses during the test: only the give-back can hand the request on.
    bus = AnnounceGate(redis_server.url, BusOptions(lease_s=60), prefix=keys)
    heir = RedisBus(redis_server.url, BusOptions(lease_s=60), prefix=keys)
    async with bus, heir, model:
        worker = Worker(bus, PROFILES, lambda p: model, parts=AgentParts(media_dir=tmp_path))
        neighbour_done = anyio.Event()  # another session hosted by the same server

        async def neighbour() -> None:
            await worker.stopped.wait()
            await anyio.lowlevel.checkpoint()  # a cancelled host group would stop it here
            neighbour_done.set()

        with anyio.fail_after(20), caplog.at_level(logging.WARNING, "baton.subagents.worker"):
            async with anyio.create_task_group() as host:
                host.start_soon(neighbour)
                await host.start(worker.run)
                sent = task("a1", "paint a fox")
                await heir.inboxes.send(sent)
                await heir.spawns.submit(PAINTER)
                await bus.announcing.wait()
                worker.give_back_now()  # as a session ending on `baton serve` does
                await worker.stopped.wait()
        assert neighbour_done.is_set() and not host.cancel_scope.cancel_called
        assert [r.getMessage() for r in caplog.records] == []  # handed back, nothing refused
        assert worker.claimed == 1 and worker.finished == 0 and worker.hosted == 0
        claim = await heir.claims.claim(worker.queue, timeout=5)  # at once, not after a lease
        assert claim is not None and claim.request.agent == "a1"
        assert await heir.inboxes.read(SESSION, "a1") == [sent]  # its task is still there


def draft_then_wait(body: Json) -> ScriptItem:
    """Round 1 summarises and stops without a result: the agent then waits for more. A message
    saying "hold" keeps the model busy (the worker stops it mid-round)."""
    messages = body["messages"]
    last_user = str([m for m in messages if m["role"] == "user"][-1]["content"])
    if "hold" in last_user:
        return Reply(text="still thinking", delay=60.0)
    if messages[-1]["role"] == "user":
        return call("summarise", "c1", text="a draft")
    return Reply(text="Drafted; waiting for the go-ahead.")


async def test_a_redis_that_came_back_empty_does_not_fail_the_give_back(
    redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every key of the bus is gone when the worker stops (a restart without persistence): the
    inbox and the spawn request have no consumer group any more. The worker still stops, cleanly:
    nothing fails, nothing reaches its host."""
    server, model = scripted(fallback=False)
    server.script.responder = draft_then_wait
    keys = prefix()
    holding = anyio.Event()

    def on_round(agent: SubAgent, batch: Sequence[Envelope]) -> None:
        # Round 2 starts only once round 1 was checkpointed and acked: the agent holds its state.
        if any("hold" in envelope.content for envelope in batch):
            holding.set()

    async with (
        RedisBus(redis_server.url, BusOptions(lease_s=60), prefix=keys) as bus,
        RedisBus(redis_server.url, BusOptions(lease_s=60), prefix=keys) as lead,
        model,
    ):
        worker = Worker(
            bus, PROFILES, lambda p: model, parts=AgentParts(media_dir=tmp_path, on_round=on_round)
        )
        with anyio.fail_after(30), caplog.at_level(logging.WARNING, "baton"):
            async with anyio.create_task_group() as host:
                await host.start(worker.run)
                await lead.inboxes.send(task("a1", "draft a fox"))
                await lead.spawns.submit(PAINTER)
                await wait_for_event(lead, SESSION, lambda e: isinstance(e, RoundEnded)
                                     and e.agent == "a1")  # fmt: skip
                await lead.inboxes.send(task("a1", "hold on"))
                await holding.wait()
                stale = [key async for key in _keys(lead, keys)]
                assert await lead._core.one("DEL", *stale) == len(stale)
                worker.give_back_now()
                await worker.stopped.wait()
        assert worker.finished == 0 and worker.hosted == 0 and not host.cancel_scope.cancel_called
        failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert failures == []  # at most a warning about what could not be handed back


async def _keys(bus: RedisBus, prefix: str) -> AsyncIterator[str]:
    cursor = "0"
    while True:
        cursor, batch = await bus._core.one("SCAN", cursor, "MATCH", f"{prefix}*", "COUNT", 1000)
        for key in batch:
            yield key
        if cursor == "0":
            return


class RefusingGiveBack(MemoryBus):
    """A bus whose every give-back step is refused (as a Redis in a bad state refuses commands)."""

    def __init__(self, options: BusOptions) -> None:
        super().__init__(options)
        before(self.inboxes, "hand_back", refuse("release_inbox"))
        before(self.claims, "release", refuse("release_spawn"))


def refuse(what: str) -> Callable[..., Awaitable[None]]:
    async def refused(*args: object, **kwargs: object) -> None:
        raise BusError(f"{what} refused by the test")

    return refused


async def test_a_refused_give_back_stays_that_agents_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, model = scripted(fallback=False)
    server.script.responder = draft_then_wait
    bus = RefusingGiveBack(BusOptions(lease_s=60))
    lead = bus.peer("lead")
    async with bus, lead, model:
        worker = Worker(bus, PROFILES, lambda p: model, parts=AgentParts(media_dir=tmp_path))
        with anyio.fail_after(20), caplog.at_level(logging.WARNING, "baton.subagents.worker"):
            async with anyio.create_task_group() as host:
                await host.start(worker.run)
                await lead.inboxes.send(task("a1", "draft a fox"))
                await lead.spawns.submit(PAINTER)
                await wait_for_event(lead, SESSION, lambda e: isinstance(e, RoundEnded)
                                     and e.agent == "a1" and e.round == 2)  # fmt: skip
                worker.give_back_now()
                await worker.stopped.wait()
        assert worker.hosted == 0 and not host.cancel_scope.cancel_called
        said = [r.getMessage() for r in caplog.records]
        assert any("release inbox of s1/a1 failed" in line for line in said), said
        assert any("release spawn" in line and "failed" in line for line in said), said

"""A spawn request nobody claims is never a silent wait (``baton.session.spawn_watch``): past the
session's bound it is logged once (``agent.unclaimed``, naming the pool and the profile); when no
live worker of the pool serves the profile, the agent is ended with that reason and the session
goes on at once instead of waiting out its timeout; and a worker whose signing key differs from
the session's refuses the agent where the lead hears it. Both backends, a real worker."""

from __future__ import annotations

from pathlib import Path

import anyio
from pydantic import SecretStr

from baton.bus.base import SpawnQueue
from baton.bus.events import AgentClaimed, AgentExited, AgentResult, AgentUnclaimed, Event
from baton.session import open_session
from baton.subagents.loop import AgentParts
from baton.subagents.worker import Worker
from tests.conftest import BusFactory
from tests.lead.helpers import PAINT_AND_WRITE
from tests.subagents.helpers import profile
from tests.support.events import logged_events

PROFILES = {
    "painter": profile("generate_image", name="painter"),
    "writer": profile("summarise", name="writer"),
}
LONG_S = 120.0
"""A session timeout no test here may come near: each must end on its own, long before it."""


def of(kind: type[Event], log: list[Event]) -> list[Event]:
    return [e for e in log if isinstance(e, kind)]


async def test_a_request_no_live_worker_serves_ends_its_agent_with_the_pool_and_profile_named(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """Pool ``gpu`` has a live worker, but it knows only the writer: the painter's request
    waits for nobody. It used to wait out the session's timeout; now it is ended after the
    bound, the writer's work goes on, and the session ends at once, naming the cause."""
    async with make_bus() as bus, make_bus() as worker_bus:
        writers = {"writer": PROFILES["writer"]}
        async with Worker(
            worker_bus, writers, pool="gpu", parts=AgentParts(media_dir=tmp_path)
        ) as worker:
            session = open_session(PAINT_AND_WRITE, bus=bus, local_workers=False, pool="gpu",
                                   unclaimed_s=0.5, timeout_s=LONG_S,
                                   media_dir=tmp_path)  # fmt: skip
            with anyio.fail_after(30):  # far below its timeout
                async with session:
                    result = await session.run()
        log = await logged_events(bus, session.id)
    [warned] = of(AgentUnclaimed, log)
    assert isinstance(warned, AgentUnclaimed)
    assert (warned.agent, warned.pool, warned.profile, warned.workers) == (
        "painter",
        "gpu",
        "painter",
        0,
    )
    exits = {e.agent: e.reason for e in log if isinstance(e, AgentExited)}
    assert exits == {"painter": "error", "writer": "finished"}
    [said] = [e for e in of(AgentResult, log) if e.agent == "painter"]
    assert isinstance(said, AgentResult)
    assert "no worker of pool 'gpu' serves profile 'painter'" in said.content
    assert f"{worker.name} serves writer" in said.content  # who is there, and what they serve
    assert result.status == "incomplete"  # the picture was asked for and never made
    assert result.error == said.content
    claimed = {e.agent: e.worker for e in log if isinstance(e, AgentClaimed)}
    assert claimed == {"writer": worker.name}
    async with make_bus() as bus:  # withdrawn: a painter worker turning up later starts nothing
        assert await bus.claims.claim(SpawnQueue.of_pool("gpu", ["painter"])) is None


async def test_with_no_worker_at_all_the_session_ends_without_waiting_out_its_timeout(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus:
        session = open_session(PAINT_AND_WRITE, bus=bus, local_workers=False, pool="gpu",
                               unclaimed_s=0.3, timeout_s=LONG_S, media_dir=tmp_path)  # fmt: skip
        with anyio.fail_after(30):
            async with session:
                result = await session.run()
        log = await logged_events(bus, session.id)
    warned = {e.agent: e.workers for e in log if isinstance(e, AgentUnclaimed)}
    assert warned == {"painter": 0, "writer": 0}  # once each
    assert {e.agent: e.reason for e in log if isinstance(e, AgentExited)} == {
        "painter": "error",
        "writer": "error",
    }
    assert result.status == "failed" and "no worker of pool 'gpu'" in result.error  # none ran


async def test_a_request_that_live_workers_serve_is_warned_about_once_and_waits(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """A live worker of the pool serves the profile but claims nothing (it is busy): the
    request is said to wait, once, and is left to wait: its session's timeout decides."""
    async with make_bus() as bus:
        await bus.workers.announce("gpu", "busy-1", ["painter", "writer"], ttl_s=LONG_S)
        session = open_session(PAINT_AND_WRITE, bus=bus, local_workers=False, pool="gpu",
                               unclaimed_s=0.2, timeout_s=2.5, media_dir=tmp_path)  # fmt: skip
        async with session:
            result = await session.run()
        log = await logged_events(bus, session.id)
    assert result.status == "timed_out"
    warned = [(e.agent, e.workers) for e in log if isinstance(e, AgentUnclaimed)]
    assert sorted(warned) == [("painter", 1), ("writer", 1)]
    exits = {e.agent: e.reason for e in log if isinstance(e, AgentExited)}
    assert exits == {"painter": "shutdown", "writer": "shutdown"}  # withdrawn at the end


async def test_a_worker_with_another_signing_key_refuses_and_the_lead_hears_it_at_once(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """The lead signs with one key, the pool's worker with another: the worker could read none
    of its agents' tasks and the lead none of their results, and the session used to wait out
    its timeout. The worker refuses each request, naming both key ids; the session, which
    cannot read the worker's envelopes, delivers the refusal to its lead with its own key."""
    ours, theirs = SecretStr("the session's key"), SecretStr("the worker's key")
    async with make_bus(signing_key=ours) as bus, make_bus(signing_key=theirs) as worker_bus:
        async with Worker(
            worker_bus, PROFILES, pool="keys", parts=AgentParts(media_dir=tmp_path)
        ) as worker:
            session = open_session(PAINT_AND_WRITE, bus=bus, local_workers=False, pool="keys",
                                   timeout_s=LONG_S, media_dir=tmp_path)  # fmt: skip
            with anyio.fail_after(30):
                async with session:
                    result = await session.run()
            assert worker.claimed == 2
        log = await logged_events(bus, session.id)
        assert await bus.letters.recent() == []  # refused before anything was sent either way
    assert not of(AgentClaimed, log)  # neither ran
    refusals = {e.agent: e.content for e in log if isinstance(e, AgentResult)}
    assert set(refusals) == {"painter", "writer"}
    for said in refusals.values():
        assert "signing key mismatch" in said
        assert f"key id {bus.key_id}" in said and f"key id {worker_bus.key_id}" in said
    assert result.status == "failed" and "signing key mismatch" in result.error

"""The memory bus keeps a bounded number of finished sessions (issue 12: it kept every finished
session's event log, so a long-lived in-process server grew with every session).

A session counts as finished once its ``session.finished`` is logged; beyond ``finished_kept`` the
oldest finished one is forgotten entirely. A running session is never dropped, however many there
are and however old.
"""

from __future__ import annotations

import pytest

from baton.bus.events import AgentExited, SessionFinished, SessionStarted
from baton.bus.memory import DEFAULT_FINISHED_KEPT, MemoryBus
from baton.bus.messages import make_envelope
from baton.bus.spend import SpendLimits
from baton.session import Session, SessionConfig
from tests.support.events import logged_events

KEPT = 3


async def live_session(bus: MemoryBus, session: str) -> None:
    """What a session leaves on a bus: a log, inboxes (read, with ledgers), agent and lead
    records, a budget and a lease."""
    await bus.log.emit(SessionStarted(session=session, agent="lead", task="t"))
    for agent in ("lead", "painter"):
        envelope = make_envelope(
            session=session, sender="user", recipient=agent, type="task", content="go"
        )
        await bus.inboxes.send(envelope)
        await bus.inboxes.read(session, agent)  # handed out, not acked: a ledger entry
    await bus.records.set_agent(session, "painter", {"status": "running"})
    await bus.records.hold_lead(session, "me", 30.0, {"status": "running"})
    await bus.budget.set_limits(session, SpendLimits(max_model_calls=10))


async def finish(bus: MemoryBus, session: str) -> None:
    await bus.log.emit(SessionFinished(session=session, agent="lead", status="completed"))


def kept(bus: MemoryBus) -> dict[str, set[str]]:
    """Which sessions each part of the bus still holds something of."""
    broker = bus._broker
    return {
        "logs": set(broker.logs),
        "inboxes": {s for s, _ in broker.inboxes},
        "agents": {s for s, _ in broker.agents},
        "leads": set(broker.leads) | set(broker.lead_leases),
        "spend": set(broker.spend),
        "ledgers": {s for s, _ in bus.inboxes._ledgers},
    }


async def test_only_the_newest_finished_sessions_are_kept_and_running_ones_never_go() -> None:
    async with MemoryBus(finished_kept=KEPT) as bus:
        running = [f"run-{n}" for n in range(5)]
        for session in running:  # the oldest of all, and never finished
            await live_session(bus, session)
        done = [f"done-{n}" for n in range(20)]
        for session in done:
            await live_session(bus, session)
            await finish(bus, session)
        expected = set(running) | set(done[-KEPT:])
        for part, sessions in kept(bus).items():
            assert sessions == expected, part
        assert set(await bus.log.sessions()) == expected
        for session in running:  # untouched: their inboxes still hold what was sent
            assert len(await logged_events(bus, session)) == 1
            assert await bus.records.lead_lease(session) is not None
            assert (await bus.records.agent(session, "painter"))["status"] == "running"
        assert await logged_events(bus, done[0]) == []  # forgotten
        # A running session that then finishes is kept as the newest, pushing out the oldest.
        await finish(bus, running[0])
        assert set(await bus.log.sessions()) == set(running) | {*done[-KEPT + 1 :], running[0]}


async def test_a_finished_session_that_starts_again_is_running() -> None:
    async with MemoryBus(finished_kept=1) as bus:
        await live_session(bus, "again")
        await finish(bus, "again")
        await bus.log.emit(SessionStarted(session="again", agent="lead", task="t"))
        for n in range(3):
            await live_session(bus, f"other-{n}")
            await finish(bus, f"other-{n}")
        assert set(await bus.log.sessions()) == {"again", "other-2"}


async def test_a_finish_logged_with_emit_once_counts_too() -> None:
    async with MemoryBus(finished_kept=1) as bus:
        for session in ("a", "b"):
            await live_session(bus, session)
            finished = SessionFinished(session=session, agent="lead", status="failed")
            exited = AgentExited(session=session, agent="lead", reason="error")
            assert await bus.log.emit_once(session, "lead", [exited, finished], mark="m")
        assert await bus.log.sessions() == ["b"]


async def test_peers_share_the_bound_and_forget_their_ledgers_too() -> None:
    async with MemoryBus(finished_kept=1) as bus:
        peer = bus.peer()
        await live_session(peer, "a")
        await finish(bus, "a")
        await live_session(bus, "b")
        await finish(peer, "b")
        assert kept(peer)["ledgers"] == set() and kept(bus)["ledgers"] == {"b"}
        assert await peer.log.sessions() == ["b"]


def test_the_bound_is_at_least_one() -> None:
    assert DEFAULT_FINISHED_KEPT == 256
    with pytest.raises(ValueError, match="1 or more"):
        MemoryBus(finished_kept=0)


async def test_sessions_through_one_memory_bus_leave_only_the_bound() -> None:
    """Whole sessions (lead, in-process worker, offline model) on one bus: what a long-lived
    in-process server does."""
    async with MemoryBus(finished_kept=2) as bus:
        ids = []
        for n in range(5):
            config = SessionConfig(task=f"paint fox {n}", approve="auto")
            async with Session(config, bus=bus) as session:
                assert (await session.run()).status == "completed"
            ids.append(session.id)
        for part, sessions in kept(bus).items():
            assert sessions <= set(ids[-2:]), part
        assert set(await bus.log.sessions()) == set(ids[-2:])
        assert not any(old in name for old in ids[:-2] for name in bus._broker.spawn)
        assert len(bus._broker.hub) == 0  # every lead and agent let go of its inboxes

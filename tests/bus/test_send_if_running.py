"""``send_if_running``: a message from outside goes only to a session that runs, on both backends.

``baton post`` (and ``baton cancel``) used to write to any session id: to a finished session,
where nothing reads it, and to an unknown one, where it made a key that never expires. The look
at the lead's record and the write are one step (one Lua script on Redis), so a session that
finishes between a look and a write cannot get it either.
"""

from __future__ import annotations

import anyio
import pytest

from baton.bus.errors import SessionNotRunning
from baton.bus.messages import Envelope, make_envelope
from tests.conftest import BusFactory


def note(session: str, to: str = "lead") -> Envelope:
    return make_envelope(session=session, sender="user", recipient=to, type="message",
                         content="also a heron")  # fmt: skip


async def test_a_running_session_gets_it_and_is_woken(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.records.hold_lead("s", "lead-1", 30, {"status": "running"})
        assert await bus.inboxes.read("s", "lead") == []  # the lead reads, then waits
        envelope = note("s")
        woken: list[bool] = []

        async def lead() -> None:
            woken.append(await bus.inboxes.wait("s", "lead", timeout=30))

        async with anyio.create_task_group() as group:
            group.start_soon(lead)
            assert await bus.inboxes.send_if_running(envelope) == envelope.id
        assert woken == [True]
        [read] = await bus.inboxes.read("s", "lead")
        assert read.id == envelope.id and read.content == "also a heron"


async def test_a_session_whose_lead_died_still_gets_it(make_bus: BusFactory) -> None:
    """Its record says running while nobody holds the lease: a resumed lead reads what waits."""
    async with make_bus() as bus:
        await bus.records.hold_lead("s", "lead-1", 0, {"status": "running"})  # the lease given up
        assert await bus.records.lead_lease("s") is None
        await bus.inboxes.send_if_running(note("s"))
        assert [e.content for e in await bus.inboxes.read("s", "lead")] == ["also a heron"]


@pytest.mark.parametrize("status", ["finished", "finishing"])
async def test_a_finished_session_gets_nothing(make_bus: BusFactory, status: str) -> None:
    async with make_bus() as bus:
        await bus.records.hold_lead("s", "lead-1", 0, {"status": status})
        with pytest.raises(SessionNotRunning) as refused:
            await bus.inboxes.send_if_running(note("s", to="painter"))
        assert refused.value.status == status and refused.value.session == "s"
        assert await bus.inboxes.read("s", "painter") == []


async def test_an_unknown_session_gets_nothing_and_no_key_is_made(
    make_bus: BusFactory, backend: str
) -> None:
    async with make_bus() as bus:
        with pytest.raises(SessionNotRunning) as refused:
            await bus.inboxes.send_if_running(note("nosuch"))
        assert refused.value.status == ""
        assert "no session nosuch" in str(refused.value)
        assert await bus.log.sessions() == []
        if backend == "redis":
            from baton.bus.redis import RedisBus

            assert isinstance(bus, RedisBus)
            assert await bus._core.one("EXISTS", bus.keys.inbox("nosuch", "lead")) == 0

"""The ``Retention`` contract (:class:`baton.bus.parts.retention.Retention`), on the memory bus
and on real Redis: nothing of a running session expires, and a retired one lives at most its
retention (the memory bus keeps nothing past its process, so it never reports an expiry;
``tests/bus/test_retention.py`` follows each Redis key)."""

from __future__ import annotations

from baton.bus.events import SessionFinished, SessionStarted
from baton.bus.messages import make_envelope
from baton.bus.parts.retention import Leftovers
from tests.conftest import BusFactory


async def test_a_running_session_never_expires_and_a_retired_one_within_its_time(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        await bus.log.emit(SessionStarted(session="s1", agent="lead", task="t"))
        await bus.inboxes.send(
            make_envelope(session="s1", sender="lead", recipient="a", type="task", content="x")
        )
        await bus.records.set_agent("s1", "a", {"status": "running"})
        assert await bus.retention.expiry("s1") is None
        await bus.log.emit(SessionFinished(session="s1", agent="lead", status="completed"))
        left = Leftovers(agents=["a"], inboxes=["a", "lead"])
        retired = await bus.retention.retire("s1", 60, left)
        assert retired.keys >= 0 and retired.consumers >= 0 and retired.dropped >= 0
        expiry = await bus.retention.expiry("s1")
        assert expiry is None or 0 < expiry <= 60
        assert (await bus.records.agent("s1", "a"))["status"] == "running"  # kept until then

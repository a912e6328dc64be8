"""An envelope is read only from the inbox it is addressed to (both backends).

A producer writing streams by hand can put an envelope in the wrong inbox; its reader must not act
on another session's or another agent's message: it goes to the dead letters with the reason.
"""

from __future__ import annotations

from baton.bus.events import ErrorEvent
from baton.bus.messages import Envelope, make_envelope
from tests.conftest import BusFactory
from tests.support.events import logged_events


def task(session: str, to: str, content: str) -> Envelope:
    return make_envelope(session=session, sender="lead", recipient=to, type="task", content=content)


async def test_an_envelope_in_another_inbox_is_dead_lettered(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        other_agent = task("s1", "b", "for b")
        other_session = task("s2", "a", "for a in s2")
        mine = task("s1", "a", "for a")
        await bus.inboxes.send_raw("s1", "a", other_agent.to_json())
        await bus.inboxes.send_raw("s1", "a", other_session.to_json())
        await bus.inboxes.send(mine)

        assert [e.id for e in await bus.inboxes.read("s1", "a")] == [mine.id]
        await bus.inboxes.ack("s1", "a", [mine.id])
        assert await bus.inboxes.read("s1", "a") == []  # the misaddressed ones were removed too

        letters = await bus.letters.recent()
        assert [letter.reason for letter in letters] == [
            "misaddressed envelope: it is for 'b' in session 's1' but sits in the inbox of 'a' "
            "in session 's1'",
            "misaddressed envelope: it is for 'a' in session 's2' but sits in the inbox of 'a' "
            "in session 's1'",
        ]
        assert Envelope.model_validate_json(letters[0].raw).id == other_agent.id
        errors = [e for e in await logged_events(bus, "s1") if isinstance(e, ErrorEvent)]
        assert len(errors) == 2 and all("misaddressed" in e.message for e in errors)
        # Nothing reached the inboxes it names either.
        assert await bus.inboxes.read("s1", "b") == []
        assert await bus.inboxes.read("s2", "a") == []

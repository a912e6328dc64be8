"""The ``DeadLetters`` contract (:class:`baton.bus.parts.dead.DeadLetters`), on the memory bus and
on real Redis, and the ``Quarantine`` every reader sets rejected input aside with."""

from __future__ import annotations

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import ErrorEvent
from baton.bus.messages import DeadLetter
from tests.conftest import BusFactory


async def test_the_newest_letters_come_back_oldest_first(make_bus: BusFactory) -> None:
    async with make_bus() as bus, make_bus() as other:
        letters = [
            DeadLetter(id=f"d{i}", reason=f"bad {i}", source="test", session=None, raw="x")
            for i in range(5)
        ]
        for letter in letters:
            await bus.letters.put(letter)
        assert (await other.letters.recent())[-5:] == letters
        assert await other.letters.recent(2) == letters[-2:]


async def test_quarantine_tells_the_session_and_keeps_the_reason(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        error = InvalidEnvelope("not valid JSON")
        await bus.quarantine(error, source="inbox:s1/a", session="s1", raw=b"{\xff")
        await bus.quarantine(error, source="baton:dead-end", session=None, raw="no session")
        first, second = (await bus.letters.recent())[-2:]
        assert (first.reason, first.source, first.session) == (error.reason, "inbox:s1/a", "s1")
        assert first.raw == "{\ufffd"  # bytes that are not UTF-8 are kept, replaced
        assert second.session is None and second.raw == "no session"
        (told,) = [logged.event async for logged in bus.log.tail("s1", follow=False)]
        assert isinstance(told, ErrorEvent) and told.detail["dead_letter"] == first.id

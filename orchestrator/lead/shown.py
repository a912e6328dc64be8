"""What the views have seen of the lead's reply this turn, so it can be taken back whole.

The lead's text reaches every view as it streams (``text.delta``). When the runtime does not take
a turn's reply as the answer (a policy sends it back, the reply is asked for again, the deadline
cut the turn), what was shown is taken back with one ``text.retracted`` (docs/protocol.md), so a
view never holds two answers. :class:`ShownText` sits between the engine and the lead's event
sink, counting the lead's characters shown since the turn began (less what the engine itself took
back, such as a retried request's text).
"""

from __future__ import annotations

from baton.bus.events import Event, TextDelta, TextRetracted
from baton.engine import EventSink
from baton.lead.prompt import LEAD_NAME


class ShownText:
    """The lead's event sink, counting the reply shown this turn; see the module docstring."""

    __slots__ = ("_emit", "_session", "chars")

    def __init__(self, session: str, emit: EventSink) -> None:
        self._session = session
        self._emit = emit
        self.chars = 0
        """Characters of the lead's reply the current turn has shown (less what it took back)."""

    def new_turn(self) -> None:
        self.chars = 0

    async def __call__(self, event: Event) -> None:
        if event.agent == LEAD_NAME:
            if isinstance(event, TextDelta):
                self.chars += len(event.text)
            elif isinstance(event, TextRetracted):
                self.chars = max(0, self.chars - event.chars)
        await self._emit(event)

    async def retract(self, why: str) -> None:
        """Take back what the current turn showed of the lead's reply (``text.retracted``)."""
        if self.chars:
            chars, self.chars = self.chars, 0
            await self._emit(
                TextRetracted(session=self._session, agent=LEAD_NAME, chars=chars, why=why)
            )

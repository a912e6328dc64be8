"""Dead letters: where the bus sets aside what it cannot deliver, and says so.

Malformed input never raises out of a read. An envelope that does not parse, is addressed to
another inbox, is unsigned on a signing bus, or a spawn request in a stream it does not belong in,
is moved to the dead-letter stream with its reason (:class:`DeadLetters`), a WARNING line is
logged, and when the session is known an ``error`` event goes to its log (:class:`Quarantine`).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import ErrorEvent
from baton.bus.ids import new_id
from baton.bus.messages import DeadLetter
from baton.bus.parts.log import EventLog

log = logging.getLogger(__name__)

DEAD_LETTERS_KEPT = 10_000
"""How many dead letters a bus keeps (the newest; on Redis about that many: ``MAXLEN ~``)."""
RAW_KEPT = 65536
"""How much of a rejected message's text a dead letter keeps, in characters."""


class DeadLetters(ABC):
    """The bus's dead-letter stream: one for every session, bounded (:data:`DEAD_LETTERS_KEPT`).

    Both methods may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries.
    """

    __slots__ = ()

    @abstractmethod
    async def put(self, letter: DeadLetter) -> None:
        """Append to the dead-letter stream (the oldest beyond the bound go)."""

    @abstractmethod
    async def recent(self, count: int = 100) -> list[DeadLetter]:
        """The most recent ``count`` dead letters, oldest first."""


async def set_aside(
    letters: DeadLetters,
    error: InvalidEnvelope,
    *,
    source: str,
    session: str | None,
    raw: str | bytes,
) -> DeadLetter:
    """Store ``raw`` as a dead letter with ``error``'s reason (text that is not UTF-8 is kept
    with replacement characters, the first :data:`RAW_KEPT` of it) and log one WARNING line."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    letter = DeadLetter(
        id=new_id(), reason=error.reason, source=source, session=session, raw=text[:RAW_KEPT]
    )
    log.warning("dead letter from %s: %s", source, error.reason)
    await letters.put(letter)
    return letter


class Quarantine:
    """Moves a rejected message aside with its reason, and tells the session's observers: what
    every reader of an inbox or a queue calls on input it cannot use."""

    __slots__ = ("letters", "log")

    def __init__(self, letters: DeadLetters, log: EventLog) -> None:
        self.letters = letters
        self.log = log

    async def __call__(
        self, error: InvalidEnvelope, *, source: str, session: str | None, raw: str | bytes
    ) -> None:
        letter = await set_aside(self.letters, error, source=source, session=session, raw=raw)
        if session is not None:
            await self.log.emit(
                ErrorEvent(
                    session=session,
                    agent="bus",
                    message=f"a malformed message was moved to the dead letters: {letter.reason}",
                    detail={"dead_letter": letter.id, "source": source},
                )
            )

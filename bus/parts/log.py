"""Session event logs: what a session's observers read, in order, from any process."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from baton.bus.events import Event


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event read back from a session log; ``cursor`` resumes a tail right after it."""

    cursor: str
    event: Event


class EventLog(ABC):
    """One capped log of events per session, and the list of sessions that have one.

    Events come back in the order they were appended, each with a cursor that later reads
    resume after. The log keeps the newest ``event_log_cap`` events (``BusOptions``). An entry
    that does not parse as an event is never handed out: it is moved to the dead letters (once,
    by whichever reader meets it first) and the tail goes on. Every method may raise
    ``BusUnreachable`` when the backend cannot be reached after its retries, and ``BusClosed``
    after the bus was closed.
    """

    __slots__ = ()

    @abstractmethod
    async def emit(self, event: Event) -> str:
        """Append to ``event.session``'s log (capped); returns the event's cursor."""

    @abstractmethod
    async def emit_once(
        self, session: str, agent: str, events: Sequence[Event], *, mark: str
    ) -> bool:
        """Append ``events`` to the session's log unless the agent's state already records
        ``mark`` (its ``logged`` field), and record it, in one step; whether they were appended.

        For a step that a worker killed half-way leaves to the next owner: redone, it is still
        logged once (a sub-agent's exit events, marked with its final report's id)."""

    @abstractmethod
    def tail(
        self, session: str, *, after: str | None = None, follow: bool = True
    ) -> AsyncIterator[LoggedEvent]:
        """Events after ``after`` (all when None), in order; with ``follow`` keeps tailing
        until cancelled (or the bus closes: ``BusClosed``). On Redis a cursor that is not a
        stream id raises ``ConfigError``."""

    @abstractmethod
    async def sessions(self) -> list[str]:
        """Ids of the sessions with an event log, most recently active first."""

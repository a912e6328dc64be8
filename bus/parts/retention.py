"""Retention: how long a finished session's data is kept (``docs/bus.md``, *Retention*)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass

DEFAULT_RETENTION_S = 7 * 24 * 3600.0
"""How long a finished session's data is kept (``docs/bus.md``, *Retention*)."""


@dataclass(frozen=True, slots=True)
class Leftovers:
    """What a finished session leaves on the bus besides its log, lead and budget: ``agents``
    name its agents (their state records), ``inboxes`` every inbox it used, and ``unread`` those
    of them nobody reads any more."""

    agents: Collection[str] = ()
    inboxes: Collection[str] = ()
    unread: Collection[str] = ()


NOTHING_LEFT = Leftovers()
"""A session that names nothing besides its log, lead record and budget."""


@dataclass(frozen=True, slots=True)
class Retired:
    """What :meth:`Retention.retire` did: the keys given a lifetime, the consumers deleted
    (their pending lists were empty), the unread entries dropped from inboxes nobody reads."""

    keys: int = 0
    consumers: int = 0
    dropped: int = 0


class Retention(ABC):
    """Nothing of a running session expires; once its end is logged, all of it does, together.

    Both methods may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed.
    """

    @abstractmethod
    async def retire(
        self, session: str, retention_s: float, left: Leftovers = NOTHING_LEFT
    ) -> Retired:
        """The session's end is logged: everything the bus keeps of it (``left`` names what
        besides its log, lead record and budget) lives ``retention_s`` more seconds, then goes;
        the inboxes of ``left.unread`` are emptied now. A backend whose data ends with its
        process keeps nothing to expire, and does nothing."""

    @abstractmethod
    async def expiry(self, session: str) -> float | None:
        """Seconds until the session's data expires; None when it has no expiry (it runs, it
        never logged its end, or the backend keeps nothing past its process)."""

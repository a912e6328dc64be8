"""Spawn requests as a worker takes them: claimed, held under a lease, and let go.

A claim is a delivery to one worker, under the same lease rules as an inbox: renewed while the
agent runs, acked when it is done for good, released at once on a graceful drain, and taken over
by another worker once a lease lapses (a worker that died or stalled).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from baton.bus.messages import DEFAULT_POOL, LOCAL_POOL, SpawnRequest, check_pool


@dataclass(frozen=True, slots=True)
class SpawnClaim:
    """A spawn request this worker now owns; ``receipt`` renews, acks or releases it.

    A receipt is opaque to callers; on both backends it names the request's stream too
    (``<entry id>@<stream>``), so it alone says where to renew, ack or release.
    """

    receipt: str
    request: SpawnRequest


@dataclass(frozen=True, slots=True)
class SpawnQueue:
    """What a worker claims from: one session's own spawn requests (``session`` set: the worker
    inside that session), or those routed to ``pool`` for the ``profiles`` it knows.

    A worker never sees a request outside its queue, so it never answers one another worker
    could serve (``docs/protocol.md``, *Spawn requests and worker pools*).
    """

    pool: str = DEFAULT_POOL
    profiles: frozenset[str] = frozenset()
    session: str | None = None

    @classmethod
    def of_session(cls, session: str) -> SpawnQueue:
        """The requests of ``session`` routed to its own worker (``pool`` = ``local``)."""
        return cls(pool=LOCAL_POOL, session=session)

    @classmethod
    def of_pool(cls, pool: str, profiles: Iterable[str]) -> SpawnQueue:
        """The requests routed to ``pool`` for one of ``profiles``; raises ``ValueError`` for a
        malformed pool name or the reserved ``local``."""
        return cls(pool=check_pool(pool), profiles=frozenset(profiles))

    @property
    def local(self) -> bool:
        return self.session is not None

    def __str__(self) -> str:
        if self.session is not None:
            return f"session {self.session}'s own queue"
        return f"pool {self.pool} ({', '.join(sorted(self.profiles)) or 'no profiles'})"


class Claims(ABC):
    """The working side of the spawn queues, for this bus's consumer (one worker).

    Every method may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed. A request that is not one, or sits in a
    stream it does not belong in, is never handed out: it goes to the dead letters.
    """

    @abstractmethod
    async def claim(self, queue: SpawnQueue, *, timeout: float = 0.0) -> SpawnClaim | None:
        """Claim one request of ``queue`` for this worker (or one a dead worker's lease let go),
        or None.

        Each request goes to exactly one claimant, and only to a claimant whose queue holds it.
        Waits up to ``timeout`` for one to arrive.
        """

    @abstractmethod
    async def renew(self, receipts: Sequence[str]) -> list[str]:
        """Heartbeat: restart the lease of requests this worker still holds.

        Returns the receipts that are still ours. One missing was taken over by another worker
        after our lease lapsed (a stall, a partition): stop running that agent, its new owner
        resumes it. Renewal never takes a request back from its new owner.
        """

    @abstractmethod
    async def ack(self, receipts: Sequence[str]) -> None:
        """The agent is done for good: the request leaves the queue."""

    @abstractmethod
    async def release(self, receipts: Sequence[str]) -> None:
        """Give requests back at once (graceful drain) so another worker resumes them."""

    @abstractmethod
    async def leave(self, queue: SpawnQueue) -> None:
        """The worker of a session's own queue stopped: stop watching its wake-ups and forget
        it (a server hosting many sessions would otherwise collect them). A pool's queue may be
        shared by several workers of this process, and is kept."""

"""The ``Bus``: one message bus, the bundle of its parts.

Two backends build it — :class:`baton.bus.memory.MemoryBus` (in-process, the default) and
:class:`baton.bus.redis.RedisBus` — each from its own implementation of every part in
:mod:`baton.bus.parts`, and one contract suite per part runs against both. Code that needs one
part takes that part: ``bus.inboxes`` (each agent's inbox), ``bus.log`` (each session's event
log), ``bus.spawns`` and ``bus.claims`` (the spawn queues, from the session's side and from a
worker's), ``bus.workers`` (who serves a pool), ``bus.records`` (agent state, the lead's lease and
record), ``bus.budget`` (the session's spend), ``bus.retention``, ``bus.store`` (a session's
key-value store) and ``bus.letters`` (dead letters). The bus itself is the lifecycle (an async
context manager), the health check, and the signing key.

Errors: every part's method may raise ``BusUnreachable`` when the backend cannot be reached after
its retries, and ``BusClosed`` after ``aclose()``. Malformed input never raises out of a read: it
is moved to the dead-letter stream with its reason and an ``error`` event goes to the session's
log.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

from baton.bus.errors import BusClosed, redact_url
from baton.bus.options import DEFAULT_EVENT_LOG_CAP, DEFAULT_LEASE_S, BusOptions
from baton.bus.parts.budget import Budget
from baton.bus.parts.claims import Claims, SpawnClaim, SpawnQueue
from baton.bus.parts.dead import DeadLetters, Quarantine
from baton.bus.parts.inboxes import DEFAULT_WAIT_S, Inboxes, InboxLedger
from baton.bus.parts.log import EventLog, LoggedEvent
from baton.bus.parts.records import LeadLease, Records
from baton.bus.parts.retention import DEFAULT_RETENTION_S, Retention, Retired
from baton.bus.parts.spawns import (
    SpawnListener,
    Spawns,
    SpawnState,
    spawn_receipt,
    spawn_receipts_by_stream,
)
from baton.bus.parts.store import SessionStore
from baton.bus.parts.workers import Workers
from baton.bus.signing import Signer, key_id, key_mismatch, stored_key_id

__all__ = [  # the bus's public face: the bundle, and the values its parts' callers name
    "DEFAULT_EVENT_LOG_CAP",
    "DEFAULT_LEASE_S",
    "DEFAULT_RETENTION_S",
    "DEFAULT_WAIT_S",
    "Bus",
    "BusOptions",
    "InboxLedger",
    "LeadLease",
    "LoggedEvent",
    "Retired",
    "SpawnClaim",
    "SpawnListener",
    "SpawnQueue",
    "SpawnState",
    "spawn_receipt",
    "spawn_receipts_by_stream",
]


class Bus(ABC):
    """One message bus: the bundle of its parts, with one lifecycle.

    Use it as an async context manager (or call ``aclose()``); a closed bus raises ``BusClosed``.
    """

    url: str
    inboxes: Inboxes
    log: EventLog
    spawns: Spawns
    claims: Claims
    workers: Workers
    records: Records
    budget: Budget
    retention: Retention
    store: SessionStore
    letters: DeadLetters
    quarantine: Quarantine

    def __init__(self, options: BusOptions | None = None) -> None:
        self.options = options or BusOptions()
        self._closed = False
        self._in_context = False

    @property
    def consumer(self) -> str:
        """This instance's consumer name: un-acked deliveries are tracked against it."""
        return self.options.consumer

    async def __aenter__(self) -> Self:
        await self.start()
        self._in_context = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        await self._finish()

    async def _finish(self) -> None:
        """The part of closing that must happen where the bus was opened (a backend with
        background tasks exits their task group here); nothing for a bus without any."""
        return None

    async def start(self) -> None:
        """Connect (a no-op for the memory bus). Raises ``BusUnreachable`` if it cannot."""
        self._check_open()

    async def aclose(self) -> None:
        """Release every connection and wake every waiter; idempotent."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise BusClosed(f"the bus {redact_url(self.url)} is closed; open a new one")

    # -- health ----------------------------------------------------------------------------

    @abstractmethod
    async def ping(self) -> None:
        """Raises ``BusUnreachable`` unless the backend answers."""

    def fail_fast(self) -> None:
        """From now on each operation tries once, until one succeeds again: the caller has
        judged the bus gone (an outage past its bound) and only winds down. Nothing for a
        backend that is never unreachable (in-process)."""
        return None

    async def probe(self, timeout_s: float) -> None:
        """Raises ``BusUnreachable`` unless the bus can carry a session now, checked within
        ``timeout_s``: the backend answers, takes a write, and delivers a wake-up to this process.

        A ``PING`` alone says too little: a process whose wake-ups no longer arrive answers it
        while every agent it hosts waits for ever (issue 22). This default suits a backend whose
        wake-ups cannot be lost (in-process); Redis sends one round trip through its pub/sub."""
        await self.ping()

    # -- signing ---------------------------------------------------------------------------

    def signer(self) -> Signer | None:
        """What signs and checks envelopes on this bus; None unless it has a signing key."""
        key = self.options.signing_key
        return None if key is None else Signer(key)

    @property
    def key_id(self) -> str:
        """The id of this bus's signing key (``baton.bus.signing.key_id``; never the key), or
        ``""`` when it signs nothing."""
        return key_id(self.options.signing_key)

    async def key_problem(self, session: str, *, sender: str = "this command") -> str | None:
        """Why ``session`` would refuse what this bus sends it (one line that says what to
        do): the session signs its envelopes (its stored setup records its key id) and this bus
        does not, or with another key. None when the keys agree, the session signs nothing, or
        it records no key id. A sender asks before it sends, so nothing goes out to be
        dead-lettered unread."""
        stored = stored_key_id((await self.records.lead(session)).get("setup", ""))
        if not stored:
            return None
        return key_mismatch(stored, self.key_id, they=f"session {session}", we=sender)

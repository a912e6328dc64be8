"""Spawn requests as a session sends them: submitted, watched, and taken back while unclaimed.

A request is routed to one stream by its session, pool and profile (:mod:`baton.bus.parts.routes`,
``docs/protocol.md``, *Spawn requests and worker pools*); workers take it from there
(:class:`~baton.bus.parts.claims.Claims`). What a submit returns is the request's *receipt*,
``<entry id>@<stream>`` on both backends, opaque to callers: it alone says where the request sits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Literal

from baton.bus.messages import SpawnRequest
from baton.bus.options import BusOptions
from baton.bus.signing import key_id

SpawnState = Literal["queued", "claimed", "gone"]
"""Where a submitted spawn request stands (:meth:`Spawns.states`): still waiting in its queue,
delivered to a worker (and not acked yet), or no longer in its queue (acked, withdrawn,
deleted)."""
SpawnListener = Callable[[SpawnRequest, str], None]
"""Told of each spawn request a bus submits for one session, with its receipt
(:meth:`Spawns.watch`)."""


def spawn_receipt(stream: str, entry_id: str) -> str:
    """A request's receipt on either backend: its entry and the stream it sits in."""
    return f"{entry_id}@{stream}"


def spawn_receipts_by_stream(receipts: Sequence[str]) -> dict[str, list[str]]:
    """Receipts grouped by their stream: stream → entry ids (an entry id holds no ``@``);
    ``ValueError`` for one that is not a receipt."""
    grouped: dict[str, list[str]] = {}
    for receipt in receipts:
        entry_id, at, stream = receipt.partition("@")
        if not at or not entry_id or not stream:
            raise ValueError(f"{receipt!r} is not a spawn receipt (<entry id>@<stream>)")
        grouped.setdefault(stream, []).append(entry_id)
    return grouped


class Spawns(ABC):
    """The sending side of the spawn queues: what a session asks workers to start.

    Every method may raise ``BusUnreachable`` when the backend cannot be reached after its
    retries, and ``BusClosed`` after the bus was closed.
    """

    def __init__(self, options: BusOptions) -> None:
        self.options = options
        self._listeners: dict[str, list[SpawnListener]] = {}

    async def submit(self, request: SpawnRequest) -> str:
        """Queue a request to start a sub-agent where its ``pool`` routes it; returns its
        receipt.

        The request goes out with this bus's signing key id as its ``key_id`` (unless it names
        one already; ``""`` without a key), so the worker that claims it can tell at once whether
        it can read the agent's messages and the session its reports (docs/protocol.md, *Signed
        envelopes*). Whoever watches the session's spawns here (:meth:`watch`) is told."""
        if request.key_id is None:
            request = request.model_copy(update={"key_id": key_id(self.options.signing_key)})
        receipt = await self._submit(request)
        for listener in self._listeners.get(request.session, ()):
            listener(request, receipt)
        return receipt

    def watch(self, session: str, listener: SpawnListener) -> Callable[[], None]:
        """Tell ``listener`` of every spawn request this bus submits for ``session`` from now
        on, with its receipt (a session's watch over its own requests that no worker claims);
        returns what stops it."""
        self._listeners.setdefault(session, []).append(listener)

        def stop() -> None:
            listeners = self._listeners.get(session, [])
            if listener in listeners:
                listeners.remove(listener)
            if not listeners:
                self._listeners.pop(session, None)

        return stop

    @abstractmethod
    async def _submit(self, request: SpawnRequest) -> str:
        """Append the request to the stream its routing names and wake that stream's workers;
        returns its receipt."""

    @abstractmethod
    async def states(self, receipts: Sequence[str]) -> dict[str, SpawnState]:
        """Where each submitted request (``submit``'s receipts) stands: ``queued`` (no worker
        has claimed it), ``claimed`` (delivered to a worker, not acked) or ``gone``."""

    @abstractmethod
    async def withdraw(self, receipts: Sequence[str]) -> list[str]:
        """Take back the requests (``submit``'s receipts) that no worker has claimed yet:
        their session is ending. Each is deleted in one step with that check, so it is never
        claimed, and its agent's inbox goes with it (the agent never ran, nothing will read
        it). Returns the receipts withdrawn; a request already claimed is left as it is."""

    @abstractmethod
    async def drop_queue(self, session: str) -> int:
        """The session ended: delete its own spawn queue with whatever is left in it (requests
        of agents given back unfinished, which nobody will resume). Returns how many requests
        it held."""

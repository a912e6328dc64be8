"""A worker's claiming: a place under its concurrency first, then a spawn request for it.

The place comes first so that a worker hosting ``concurrency`` agents claims nothing more until
one leaves (a :class:`anyio.CapacityLimiter`, a token per agent, released when its agent leaves).
A claim blocks at most ``timeout_s``, so a stop is noticed by then even on a bus that is slow to
answer; a stop also cuts a claim under way, and a request claimed just as the stop came is given
back at once. The bus's refusals (``LOADING`` while a restarted Redis reads its data back,
``READONLY`` during a failover) pass: the worker asks again, it never dies of one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio

from baton.bus.base import Bus, SpawnClaim, SpawnQueue
from baton.bus.errors import BusClosed, BusError, BusUnreachable
from baton.bus.retry import persist

log = logging.getLogger("baton.subagents.worker")
"""The worker's log: this is the worker's doing, and operators filter on that name."""

CLAIM_REFUSED_S = 1.0
"""How long a worker waits before claiming again after the bus refused a claim."""


class Claiming:
    """Claims from ``queue`` for the worker named ``worker``, at most ``concurrency`` agents
    hosted at once, each claim waiting at most ``timeout_s``."""

    __slots__ = ("_bus", "_limiter", "_queue", "_scope", "_stopped", "_timeout_s", "_worker")

    def __init__(
        self, bus: Bus, queue: SpawnQueue, worker: str, *, concurrency: int, timeout_s: float
    ) -> None:
        self._bus = bus
        self._queue = queue
        self._worker = worker
        self._timeout_s = timeout_s
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._scope: anyio.CancelScope | None = None
        self._stopped = False

    def stop(self) -> None:
        """Claim no more, cutting a claim under way."""
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()

    def release(self, token: object) -> None:
        """The agent that held ``token``'s place has left: another may be claimed."""
        self._limiter.release_on_behalf_of(token)

    async def run(
        self,
        host: Callable[[SpawnClaim, object], None],
        give_back: Callable[[list[str]], Awaitable[None]],
    ) -> None:
        """Claim until :meth:`stop`: each claim goes to ``host`` with the token of its place
        (:meth:`release` it when its agent leaves); one claimed as the stop came goes to
        ``give_back``."""
        while not self._stopped:
            token = object()
            claim: SpawnClaim | None = None
            with anyio.CancelScope() as self._scope:
                if self._stopped:
                    break
                await self._limiter.acquire_on_behalf_of(token)
                try:
                    claim = await persist(
                        partial(self._bus.claims.claim, self._queue, timeout=self._timeout_s),
                        "claim",
                    )
                except (BusClosed, BusUnreachable):
                    raise
                except BusError as exc:
                    # A refusal (LOADING while a restarted Redis reads its data back, READONLY
                    # during a failover) passes: the worker asks again, it never dies of one.
                    log.warning("worker %s: claim refused: %s; asking again in %.0f s",
                                self._worker, exc, CLAIM_REFUSED_S)  # fmt: skip
                    await anyio.sleep(CLAIM_REFUSED_S)
                finally:
                    if claim is None:
                        self._limiter.release_on_behalf_of(token)
            self._scope = None
            if claim is None:
                continue
            if self._stopped:
                self._limiter.release_on_behalf_of(token)
                await give_back([claim.receipt])
                break
            host(claim, token)

    async def leave(self) -> None:
        """Claiming is over: the bus may forget this worker's watch on the queue (only its
        wake-ups are at stake, so a failure is no more than a debug line)."""
        try:
            await self._bus.claims.leave(self._queue)
        except BusError as exc:
            log.debug("worker %s: leaving %s: %s", self._worker, self._queue, exc)

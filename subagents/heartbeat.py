"""A worker's heartbeat: it says that it serves its pool, and it renews its agents' leases.

Both are on a timer of their own, apart from claiming and hosting, and both ride out the bus: an
announcement is bounded and best effort (a worker never stops serving for it), and a failed renewal
keeps every agent, renewed at the next beat (a lease spans several beats). Only the bus's answer
can say a lease was lost, and only for the receipts that answer was about: those agents stop here
without a report, and their new owner resumes them from the checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial

import anyio

from baton.bus.base import Bus, SpawnQueue
from baton.bus.errors import BusClosed, BusError
from baton.subagents.loop import SubAgent
from baton.subagents.settling import GIVE_BACK_S
from baton.subagents.stopping import GIVE_BACK_GRACE_S

log = logging.getLogger("baton.subagents.worker")
"""The worker's log: this is the worker's doing, and operators filter on that name."""


class Heartbeat:
    """The beat of the worker named ``worker`` that claims from ``queue``: every ``every_s`` it
    announces the pool and renews the leases of the agents it hosts, ``renew_slice`` a call
    (``baton.subagents.worker.RENEW_SLICE`` says why a slice)."""

    __slots__ = ("_announced", "_bus", "_queue", "_worker", "every_s", "renew_slice")

    def __init__(
        self, bus: Bus, queue: SpawnQueue, worker: str, *, every_s: float, renew_slice: int
    ) -> None:
        self._bus = bus
        self._queue = queue
        self._worker = worker
        self.every_s = every_s
        self.renew_slice = renew_slice
        self._announced = True
        """Whether the last announcement that it serves its pool went out (:meth:`announce`)."""

    async def run(
        self,
        hosted: Mapping[str, SubAgent],
        *,
        claiming: Callable[[], bool],
        release_parked: Callable[[str], None],
    ) -> None:
        """Beat until cancelled or the bus is closed: ``hosted`` are the agents by receipt,
        announced while ``claiming()``; an agent whose lease was lost is stopped, and handed to
        ``release_parked`` in case it is parked (it stops once resumed)."""
        while True:
            await anyio.sleep(self.every_s)
            if claiming():
                await self.announce()
            receipts = list(hosted)
            try:
                for first in range(0, len(receipts), self.renew_slice):
                    part = receipts[first : first + self.renew_slice]
                    await self._renew(part, hosted, release_parked)
            except BusClosed:
                return
            except BusError as exc:
                # No answer (or a refusal, such as READONLY from a replica during a failover) is
                # not "not yours": every agent stays, and the next beat renews the leases (a lease
                # spans several beats). Only the bus's answer can say a lease was lost, and only
                # for the receipts that answer was about.
                log.warning("heartbeat of %d leases failed: %s; retrying", len(receipts), exc)

    async def _renew(
        self,
        receipts: list[str],
        hosted: Mapping[str, SubAgent],
        release_parked: Callable[[str], None],
    ) -> None:
        """Renew the leases of ``receipts``; stop the agents whose lease the bus says we lost."""
        held = set(await self._bus.claims.renew(receipts))
        for receipt in receipts:
            agent = hosted.get(receipt)
            if receipt not in held and agent is not None:
                # Our lease lapsed (a stall) and another worker took the agent over: stop this
                # copy without a report; the new owner resumes from the checkpoint.
                log.warning("lost the lease of %s/%s; stopping here", agent.session, agent.name)
                agent.lose_lease()
                release_parked(receipt)  # a parked one stops once resumed

    async def announce(self, *, stopping: bool = False) -> None:
        """Tell the pool's sessions that this worker serves the pool for its profiles (renewed
        at every heartbeat), or, ``stopping``, that it no longer does: a session whose request
        nobody claims asks this before it gives up on it (``Bus.pool_workers``). Bounded and
        best effort: a worker never stops serving for it. A session's own worker announces
        nothing (its session knows it)."""
        queue = self._queue
        if queue.local:
            return
        ttl = 0.0 if stopping else self.every_s * 3  # three beats: one missed is no death
        announce = partial(self._bus.workers.announce, queue.pool, self._worker,
                           queue.profiles, ttl)  # fmt: skip
        problem: object = None
        bound_s = GIVE_BACK_GRACE_S if stopping else min(GIVE_BACK_S, self.every_s)
        with anyio.move_on_after(bound_s) as bound:
            try:
                await announce()
            except BusError as exc:
                problem = exc
        if bound.cancelled_caught:
            problem = "the bus did not answer in time"
        if problem is not None and self._announced and not stopping:  # once per run of failures
            log.warning("worker %s: could not announce that it serves pool %s (a session that "
                        "finds no live worker ends the agents it waits for): %s",
                        self._worker, queue.pool, problem)  # fmt: skip
        self._announced = problem is None

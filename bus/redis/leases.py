"""A worker's leases on its spawn entries, kept on Redis: renewed, and checked when they may have
lapsed.

One lease per hash tag (a member of ``spawn_leases``: consumer -> when it lapses), renewed with
:file:`scripts/keep_lease.lua`, one call per lease, all in one round trip. While a lease lives, no
other worker takes an entry under it. Where it may have lapsed (a reply said so, or was lost) or a
fault came between (a failover may lose a delivery of ours that another worker has since been
given), every entry under it is checked once with :file:`scripts/claim_if_mine.lua`: what is no
longer pending to us was taken over, and the renewals that ask about it say so. The claims
themselves are :mod:`baton.bus.redis.claims`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from baton.bus.parts.spawns import spawn_receipt, spawn_receipts_by_stream
from baton.bus.redis.core import RedisCore
from baton.bus.redis.scripts import CLAIM_IF_MINE, KEEP_LEASE
from baton.bus.redis.spawns import per_stream

log = logging.getLogger("baton.bus.redis.claims")
"""The claims' log: the leases are theirs, and operators filter on that name."""

RENEW_CHUNK = 250
"""The most entries one check (or hand-back) operation holds. A script runs alone on its node:
a worker of 12,500 agents renewing all at once held its master for 130 ms each heartbeat, and every
command of every client there waited (the dispatch p99 at 100,000 agents). A chunk holds it for
about 1 ms (``claim_if_mine.lua``: some 4-5 µs an entry, the chunk's ids in ascending order);
between chunks the node serves the others."""

CHECK_SLICE = 2000
"""Receipts one full check of a lease prepares at a time (grouped and sorted before their first
round trip, while the event loop serves nothing else): a few milliseconds each."""


@dataclass(slots=True, eq=False)
class Lease:
    """This worker's lease on its entries of the streams one channel wakes: its member of the
    tag's leases, ``key``."""

    key: str
    epoch: int
    """The fault epoch of the last full check (or of the lease's first use): after a fault, a
    failover may have lost a delivery of ours that another worker has since been given."""
    held: set[str] = field(default_factory=set)
    """The receipts handed out under it and not yet acked, released or reported lost."""
    lapses: int = 0
    """How often a reply said the lease had lapsed, or was lost (it may have)."""
    checked: int = 0
    """How many of ``lapses`` a full check has answered for."""
    streams: set[str] = field(default_factory=set)
    """The streams it covers that this bus has met."""
    left: bool = False
    """Its session's worker left the queue: forgotten once it holds nothing."""


class LeaseKeeper:
    """Keeps the leases of this bus's consumer on ``core``'s Redis."""

    __slots__ = ("_core",)

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def keep(self, leases: list[Lease], lost: set[str]) -> None:
        """Renew ``leases`` in one round trip, then check those that may have lapsed (or met a
        fault since their last check); what a check finds taken over goes into ``lost``."""
        core = self._core
        lease_ms = lease_ms_of(core.options.lease_s)
        try:
            kept = await core.call(
                *(KEEP_LEASE.call(lease.key, core.consumer, lease_ms) for lease in leases)
            )
        except BaseException:
            for lease in leases:
                lease.lapses += 1  # it may have lapsed, and been made live again by this call
            raise
        for lease, was_there in zip(leases, kept, strict=True):
            if not int(was_there):
                lease.lapses += 1
        for lease in leases:
            if lease.lapses != lease.checked or lease.epoch != core.epoch:
                await self._check(lease, lost)

    async def _check(self, lease: Lease, lost: set[str]) -> None:
        """Find which of the entries under ``lease`` are still ours; the rest are lost (another
        worker took them over while the lease had lapsed), reported by the renewals that ask."""
        lapses, epoch = lease.lapses, self._core.epoch
        receipts = list(lease.held)
        still: set[str] = set()
        for first in range(0, len(receipts), CHECK_SLICE):
            part = receipts[first : first + CHECK_SLICE]
            still.update(await self.move_mine(part, self._core.consumer, 0))
        # One acked or handed back meanwhile is no longer held, so not lost either.
        gone = {r for r in receipts if r not in still and r in lease.held}
        lease.held -= gone
        lost |= gone
        lease.checked, lease.epoch = lapses, epoch
        if gone:
            log.warning("%d spawn requests were taken over while our lease %s had lapsed",
                        len(gone), lease.key)  # fmt: skip

    async def move_mine(self, receipts: Sequence[str], to: str, idle_ms: int) -> list[str]:
        """Move the entries of ``receipts`` still pending for us to consumer ``to``, idle
        ``idle_ms`` (``claim_if_mine.lua``), in chunks; the receipts moved. A stream whose group
        is gone holds none of them."""
        if not receipts:
            return []
        core = self._core
        held: list[str] = []
        gone: set[str] = set()
        by_stream = spawn_receipts_by_stream(receipts)
        for ids in by_stream.values():
            ids.sort(key=_entry_order)  # each chunk one narrow range of the stream (the script)
        for grouped in _chunks(by_stream, RENEW_CHUNK):
            replies = await per_stream(core, CLAIM_IF_MINE, grouped, core.consumer, to, idle_ms)
            for stream, reply in zip(grouped, replies, strict=True):
                if reply is None:  # the group is gone: so is the request, nobody can take it
                    gone.add(stream)  # over
                    continue
                held.extend(spawn_receipt(stream, str(entry_id)) for entry_id in reply)
        for stream in gone:
            core.groups.forget(stream)
        return held


def lease_ms_of(lease_s: float) -> int:
    return max(1, int(lease_s * 1000))


def _entry_order(entry_id: str) -> tuple[int, int]:
    """A stream entry id (``<ms>-<seq>``) as the stream orders it."""
    ms, _, seq = entry_id.partition("-")
    try:
        return int(ms), int(seq)
    except ValueError:
        raise ValueError(f"{entry_id!r} is not a stream entry id") from None


def _chunks(grouped: dict[str, list[str]], most: int) -> list[dict[str, list[str]]]:
    """``grouped`` (stream -> entry ids) cut into operations of at most ``most`` entries."""
    operations: list[dict[str, list[str]]] = [{}]
    size = 0
    for stream, ids in grouped.items():
        for first in range(0, len(ids), most):
            part = ids[first : first + most]
            if size + len(part) > most and size:
                operations.append({})
                size = 0
            operations[-1].setdefault(stream, []).extend(part)
            size += len(part)
    return operations

"""Spawn requests on Redis, from a worker's side: claimed, renewed, acked, released.

A claim is one script (:file:`scripts/claim_spawn.lua`) over the worker's streams, starting at a
rotating one; it also makes any missing consumer group, so a Redis that came back empty never
stops a worker (the loss is reported once, by the core). A claim is a delivery to this worker,
acked when the agent is done for good, and handed back at once on a graceful drain (only where
still ours, to another consumer name: :file:`scripts/claim_if_mine.lua`). A receipt is
``<entry id>@<stream>``: it alone says where to do each.

**The lease is the worker's, not each entry's**: one member per worker of one sorted set per
hash tag (``spawn_leases``: consumer -> when its lease lapses; :file:`scripts/keep_lease.lua`),
which a renewal moves on, and a claimant takes an entry only from a consumer whose lease lapsed.
The set is one key the scripts declare, so it moves with the streams' slot on a Cluster (a key of
each worker, read undeclared, did not: during a slot's migration a claimant could find a live
worker's key missing). A beat of 50,000 agents is one command,
where renewing each entry's idle time was 50,000 ``XCLAIM`` calls every beat on one master, and a
second of the worker's own loop. What the per-entry renewal also did, tell a worker which of its
entries another took over, is now done only when that can have happened: when the lease had
lapsed (a reply of ours says so, or was lost) or after a fault (a failover may lose a delivery),
every entry under it is checked once with :file:`scripts/claim_if_mine.lua`. Keeping the leases on
Redis is :mod:`baton.bus.redis.leases`; this module knows which receipts each lease holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio

from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import parse_spawn_request
from baton.bus.parts.claims import Claims, SpawnClaim, SpawnQueue
from baton.bus.parts.dead import Quarantine
from baton.bus.parts.spawns import spawn_receipt, spawn_receipts_by_stream
from baton.bus.redis.adapter import NoGroup, RedisRefused
from baton.bus.redis.consumers import ConsumerSweeper
from baton.bus.redis.core import RedisCore, entry_fields
from baton.bus.redis.inboxes import RELEASED_IDLE_MS
from baton.bus.redis.keys import SPAWN_GROUP
from baton.bus.redis.leases import Lease, LeaseKeeper, lease_ms_of
from baton.bus.redis.scripts import ACK_AND_DELETE, CLAIM_SPAWN
from baton.bus.redis.spawns import per_stream
from baton.bus.utf8 import printable
from baton.bus.wake import RELEASED

log = logging.getLogger(__name__)

_Found = tuple[str, str, dict[str, str] | None]
"""A delivered entry: its stream, its id and its fields (None: deleted meanwhile)."""


@dataclass(slots=True)
class _Claiming:
    """What this bus remembers about claiming from one queue."""

    streams: tuple[str, ...]
    channel: str
    lease: Lease
    epoch: int = -1  # the fault epoch in which we last re-read our own pending claims
    backlog: list[_Found] = field(default_factory=list)
    """Our own pending requests found after a fault and not handed out yet, one a claim: no
    other worker takes them while our lease lives, so nothing else would."""
    expiry_checked_at: float = float("-inf")
    releases_seen: int = 0
    turn: int = 0  # which stream the next claim looks at first


class RedisClaims(Claims):
    """The worker's side of the spawn queues on Redis, for this bus's consumer."""

    def __init__(self, core: RedisCore, quarantine: Quarantine) -> None:
        self._core = core
        self._quarantine = quarantine
        self._queues: dict[SpawnQueue, _Claiming] = {}
        self._leases: dict[str, Lease] = {}
        """Stream -> our lease on it (streams woken by one channel share one)."""
        self._by_key: dict[str, Lease] = {}
        self._lost: set[str] = set()
        """Receipts a full check found no longer ours, until a renewal reports them."""
        self._broken: set[str] = set()
        """Streams a claim skips because they refuse to be read (reported once each)."""
        self._sweeper = ConsumerSweeper(core)
        self._keeper = LeaseKeeper(core)

    def _claiming(self, queue: SpawnQueue) -> _Claiming:
        state = self._queues.get(queue)
        if state is None:
            streams, channel = self._core.keys.spawn_queue(queue)
            lease = self._lease(streams[0]) if streams else self._lease_of_channel(channel)
            state = self._queues[queue] = _Claiming(streams, channel, lease)
        return state

    def _lease(self, stream: str) -> Lease:
        """Our lease on ``stream``'s entries, shared by every stream its channel wakes."""
        lease = self._leases.get(stream)
        if lease is None:
            lease = self._leases[stream] = self._lease_of_channel(
                self._core.keys.spawn_channel(stream)
            )
            lease.streams.add(stream)
        return lease

    def _lease_of_channel(self, channel: str) -> Lease:
        """Our lease on the streams ``channel`` wakes (made on first use)."""
        key = self._core.keys.spawn_leases(channel)
        lease = self._by_key.get(key)
        if lease is None:
            lease = self._by_key[key] = Lease(key, self._core.epoch)
        return lease

    def _holds(self, receipt: str) -> bool:
        lease = self._leases.get(_stream_of(receipt))
        return lease is not None and receipt in lease.held

    def _forget(self, receipts: Sequence[str]) -> None:
        """No longer ours to renew, ack or hand back: done with, handed back, or lost."""
        for receipt in receipts:
            lease = self._leases.get(_stream_of(receipt))
            if lease is not None:
                lease.held.discard(receipt)
                if lease.left and not lease.held:
                    self._drop(lease)
            self._lost.discard(receipt)

    def _drop(self, lease: Lease) -> None:
        """Forget a lease (it lapses by itself within a lease): a long-running process
        meets a new session's stream for every session it hosts."""
        self._by_key.pop(lease.key, None)
        for stream in lease.streams:
            self._leases.pop(stream, None)

    async def claim(self, queue: SpawnQueue, *, timeout: float = 0.0) -> SpawnClaim | None:
        core = self._core
        core.check_open()
        state = self._claiming(queue)
        watch = await core.watch(state.channel)
        # The deadline bounds only the waiting: a claim cut off in flight would leave its request
        # pending to us until our next look at our own pending entries.
        deadline = anyio.current_time() + timeout
        while True:
            mark = watch.generation
            if watch.releases != state.releases_seen:  # someone handed work back
                state.releases_seen = watch.releases
                state.expiry_checked_at = float("-inf")
            claim = await self._claim_one(queue, state) if state.streams else None
            if claim is not None:
                return claim
            if not queue.local:  # a pool's streams outlive every session: sweep them now and then
                await self._sweeper.now_and_then(state.streams, SPAWN_GROUP)
            left = deadline - anyio.current_time()
            if left <= 0:
                return None
            # Expired leases free up without a wake-up: look again at least once a lease.
            await watch.wait(min(left, core.options.lease_s), since=mark)
            core.check_open()

    async def _claim_one(self, queue: SpawnQueue, state: _Claiming) -> SpawnClaim | None:
        """The next valid request; malformed or misrouted ones met on the way are set aside."""
        while True:
            try:
                if not state.backlog:
                    state.backlog = await self._own_pending(state)
                found = state.backlog or await self._take(state)
            except BaseException:
                state.epoch = -1  # the reply may be lost: look at our own pending next time
                raise
            if not found:
                return None
            claim = await self._screen(queue, found)
            if claim is not None:
                return claim

    async def _own_pending(self, state: _Claiming) -> list[_Found]:
        """After a fault, what was delivered to us and never handed out (a lost reply)."""
        core = self._core
        if state.epoch == core.epoch:
            return []
        state.epoch = core.epoch
        found: list[_Found] = []
        for stream in state.streams:
            try:
                mine = await core.own_pending(stream, SPAWN_GROUP, core.consumer)
            except NoGroup:
                continue  # nothing is pending on a group that is gone; the claim makes it again
            except RedisRefused as exc:  # not a stream (WRONGTYPE): the others still count
                self._note_broken([], {stream: str(exc)})
                continue
            found.extend(
                (stream, entry_id, fields)
                for entry_id, fields in mine
                if not self._holds(spawn_receipt(stream, entry_id))
            )
        return found

    async def _take(self, state: _Claiming) -> list[_Found]:
        """One request whose claimant's lease expired, else one nobody has claimed yet.

        The pending list holds a claim for every agent running anywhere, and those of a live
        worker are idle past the lease too (nobody renews them one by one), so the script walks
        the consumers instead (``XINFO CONSUMERS``: one row a worker) and only those whose lease
        lapsed (``XPENDING ... IDLE ... <consumer>``). Even that only when asked: at most
        every quarter lease while none turns up, and at once after a hand-back.
        """
        core = self._core
        lease_s = core.options.lease_s
        now = time.monotonic()
        look = now - state.expiry_checked_at >= lease_s / 4
        first = state.turn % len(state.streams)
        state.turn = first + 1
        order = state.streams[first:] + state.streams[:first]
        flag = "1" if look else "0"
        lease = state.lease
        script = CLAIM_SPAWN.call_keys(
            [*order, lease.key], SPAWN_GROUP, core.consumer, lease_ms_of(lease_s), flag
        )
        try:
            reply = await core.one(*script)
        except BaseException:
            lease.lapses += 1  # the reply may have said our lease had lapsed
            raise
        created, looked, stream, entry_id, flat, how, failed, kept = reply
        if not int(kept) and lease.held:
            lease.lapses += 1  # set again with this claim: what we held before may be gone
        skipped = dict(zip(failed[::2], failed[1::2], strict=True)) if failed else {}
        seen = [key for key in order[: int(looked)] if key not in skipped]
        core.groups.made(seen, [str(key) for key in created or ()])
        self._note_broken(seen, skipped)
        if look and how != "expired":
            state.expiry_checked_at = now
        if not stream:
            return []
        return [(str(stream), str(entry_id), entry_fields(flat))]

    def _note_broken(self, read: Sequence[str], broken: dict[str, str]) -> None:
        """Report once each stream a claim had to skip (a key that is no stream, because
        someone wrote another type there: WRONGTYPE), and once when it reads again (``read``).
        Claims go on from the other streams meanwhile: one broken profile never stops a pool."""
        for key, error in broken.items():
            if key not in self._broken:
                self._broken.add(key)
                log.warning(
                    "spawn queue %s cannot be read (%s): its requests wait until the key is a "
                    "stream again; the other queues are served",
                    key, printable(str(error))[:200],
                )  # fmt: skip
        for key in self._broken.intersection(read):
            self._broken.discard(key)
            log.info("spawn queue %s can be read again", key)

    async def _screen(self, queue: SpawnQueue, found: list[_Found]) -> SpawnClaim | None:
        """The first usable request of ``found``, which it takes out of ``found`` with what it
        set aside on the way (the rest is left for the next claim). What cannot be run (not a
        request, or one that does not belong in the stream it sits in) goes to the dead
        letters."""
        core = self._core
        while found:
            stream, entry_id, fields = found.pop(0)
            if fields is None:  # delivered, then deleted: nothing left to run
                await core.ack(stream, SPAWN_GROUP, [entry_id])
                continue
            raw = fields.get("req")
            try:
                if raw is None:
                    raise InvalidEnvelope(
                        f"spawn entry has no 'req' field (fields: {sorted(fields)[:5]})"
                    )
                request = parse_spawn_request(raw)
                core.keys.check_spawn_stream(request, stream, queue, raw)
            except InvalidEnvelope as exc:
                await self._quarantine(exc, source=stream, session=None, raw=raw or str(fields))
                await core.ack(stream, SPAWN_GROUP, [entry_id])
                continue
            receipt = spawn_receipt(stream, entry_id)
            self._lease(stream).held.add(receipt)
            return SpawnClaim(receipt, request)
        return None

    async def renew(self, receipts: Sequence[str]) -> list[str]:
        """One :file:`keep_lease.lua` per lease the receipts are under, in one round trip; a
        full check of a lease's entries where it had lapsed or a fault came between (see the
        module's docstring). A receipt this bus never handed out (or has forgotten: acked or
        handed back, even where that failed) is asked about on its own, as every receipt once
        was, and not taken under the lease: one still pending to us after a failed ack comes
        back with our own pending after the fault, and is acked by its next host."""
        if not receipts:
            return []
        leases = {self._lease(stream) for stream in {_stream_of(r) for r in receipts}}
        await self._keeper.keep([lease for lease in leases if lease.held], self._lost)
        holds: Callable[[str], bool] = self._holds
        if len(leases) == 1:  # the usual case: one pool's (or one session's) requests
            holds = next(iter(leases)).held.__contains__
        held = [r for r in receipts if holds(r)]
        if len(held) < len(receipts) and (
            unknown := [r for r in receipts if not self._holds(r) and r not in self._lost]
        ):
            held.extend(await self._keeper.move_mine(unknown, self._core.consumer, 0))
        if self._lost:
            self._forget([r for r in receipts if r in self._lost])
        return held

    async def ack(self, receipts: Sequence[str]) -> None:
        if not receipts:
            return
        try:
            await per_stream(self._core, ACK_AND_DELETE, spawn_receipts_by_stream(receipts))
        finally:
            # Forgotten whatever the bus said: the worker is done with them either way. One
            # still pending to us after a failed ack comes back with our own pending, and its
            # next host finds the agent exited and only acks it.
            self._forget(receipts)

    async def release(self, receipts: Sequence[str]) -> None:
        """Hand back what is still ours, to ``<us>:released`` idle for years (the next claim
        takes it at once), then wake the pool's workers."""
        if not receipts:
            return
        core = self._core
        try:
            to = f"{core.consumer}:released"
            released = await self._keeper.move_mine(receipts, to, RELEASED_IDLE_MS)
            if streams := spawn_receipts_by_stream(released):
                wake = core.keys.spawn_channel
                await core.call(*(("PUBLISH", wake(stream), RELEASED) for stream in streams))
        finally:  # not ours to run any more, handed back or not (as after ack)
            self._forget(receipts)
        for state in self._queues.values():
            state.expiry_checked_at = float("-inf")

    async def leave(self, queue: SpawnQueue) -> None:
        if queue.session is None:
            return  # a pool's channel may serve other workers of this process
        state = self._queues.pop(queue, None)
        if state is None:
            return
        await self._core.unwatch(state.channel)
        state.lease.left = True
        if not state.lease.held:  # else once its last receipt is acked, handed back or lost
            self._drop(state.lease)


def _stream_of(receipt: str) -> str:
    return receipt.partition("@")[2]

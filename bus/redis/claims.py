"""Spawn requests on Redis, from a worker's side: claimed, renewed, acked, released.

A claim is one script (:file:`scripts/claim_spawn.lua`) over the worker's streams, starting at a
rotating one; it also makes any missing consumer group, so a Redis that came back empty never
stops a worker (the loss is reported once, by the core). A claim is a delivery to this worker; its
lease is renewed while the agent runs (only where it is still ours:
:file:`scripts/claim_if_mine.lua`), acked when the agent is done for good, and handed back at once
on a graceful drain (the same script: only where still ours, to another consumer name, so a
renewal racing the hand-back cannot make it ours again). A receipt is ``<entry id>@<stream>``: it
alone says where to do each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

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
from baton.bus.redis.scripts import ACK_AND_DELETE, CLAIM_IF_MINE, CLAIM_SPAWN
from baton.bus.redis.spawns import per_stream
from baton.bus.utf8 import printable
from baton.bus.wake import RELEASED

log = logging.getLogger(__name__)

RENEW_CHUNK = 250
"""The most entries one renewal (or hand-back) operation holds. A script runs alone on its node:
a worker of 12,500 agents renewing all at once held its master for 130 ms each heartbeat, and every
command of every client there waited (the dispatch p99 at 100,000 agents). A chunk holds it for
about 1 ms (``claim_if_mine.lua``: some 4-5 µs an entry, the chunk's ids in ascending order);
between chunks the node serves the others."""

_Found = tuple[str, str, dict[str, str] | None]
"""A delivered entry: its stream, its id and its fields (None: deleted meanwhile)."""


@dataclass(slots=True)
class _Claiming:
    """What this bus remembers about claiming from one queue."""

    streams: tuple[str, ...]
    channel: str
    epoch: int = -1  # the fault epoch in which we last re-read our own pending claims
    expiry_checked_at: float = float("-inf")
    releases_seen: int = 0
    turn: int = 0  # which stream the next claim looks at first


class RedisClaims(Claims):
    """The worker's side of the spawn queues on Redis, for this bus's consumer."""

    def __init__(self, core: RedisCore, quarantine: Quarantine) -> None:
        self._core = core
        self._quarantine = quarantine
        self._queues: dict[SpawnQueue, _Claiming] = {}
        self._held: set[str] = set()
        self._broken: set[str] = set()
        """Streams a claim skips because they refuse to be read (reported once each)."""
        self._sweeper = ConsumerSweeper(core)

    def _claiming(self, queue: SpawnQueue) -> _Claiming:
        state = self._queues.get(queue)
        if state is None:
            streams, channel = self._core.keys.spawn_queue(queue)
            state = self._queues[queue] = _Claiming(streams, channel)
        return state

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
                found = await self._own_pending(state) or await self._take(state)
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
                if spawn_receipt(stream, entry_id) not in self._held
            )
        return found

    async def _take(self, state: _Claiming) -> list[_Found]:
        """One request whose claimant's lease expired, else one nobody has claimed yet.

        The pending list holds a claim for every agent running anywhere, so a walk of it per
        claim would make starting n agents cost n². The script looks for an expired one
        (XPENDING ... IDLE) only when asked: at most every quarter lease while none turns up,
        and at once after a hand-back.
        """
        core = self._core
        lease_s = core.options.lease_s
        now = time.monotonic()
        look = now - state.expiry_checked_at >= lease_s / 4
        first = state.turn % len(state.streams)
        state.turn = first + 1
        order = state.streams[first:] + state.streams[:first]
        flag = "1" if look else "0"
        script = CLAIM_SPAWN.call_keys(order, SPAWN_GROUP, core.consumer, int(lease_s * 1000), flag)
        created, looked, stream, entry_id, flat, how, failed = await core.one(*script)
        skipped = dict(zip(failed[::2], failed[1::2], strict=True)) if failed else {}
        seen = [key for key in order[: int(looked)] if key not in skipped]
        core.groups_made(seen, [str(key) for key in created or ()])
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
        """The first usable request of ``found``; the rest of ``found`` stays pending to us and
        comes back with our own pending after the next fault or lease. What cannot be run (not
        a request, or one that does not belong in the stream it sits in) goes to the dead
        letters."""
        core = self._core
        for stream, entry_id, fields in found:
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
            self._held.add(receipt)
            return SpawnClaim(receipt, request)
        return None

    async def renew(self, receipts: Sequence[str]) -> list[str]:
        """In operations of at most :data:`RENEW_CHUNK` entries, one after the other (a few
        receipts over many streams still go in one round trip)."""
        core = self._core
        held = await self._move_mine(receipts, core.consumer, 0)
        self._held.difference_update(set(receipts) - set(held))
        return held

    async def _move_mine(self, receipts: Sequence[str], to: str, idle_ms: int) -> list[str]:
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
            core.forget_group(stream)
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
            self._held.difference_update(receipts)

    async def release(self, receipts: Sequence[str]) -> None:
        """Hand back what is still ours, to ``<us>:released`` idle for years (the next claim
        takes it at once), then wake the pool's workers."""
        if not receipts:
            return
        core = self._core
        try:
            to = f"{core.consumer}:released"
            released = await self._move_mine(receipts, to, RELEASED_IDLE_MS)
            if streams := spawn_receipts_by_stream(released):
                wake = core.keys.spawn_channel
                await core.call(*(("PUBLISH", wake(stream), RELEASED) for stream in streams))
        finally:  # not ours to run any more, handed back or not (as after ack)
            self._held.difference_update(receipts)
        for state in self._queues.values():
            state.expiry_checked_at = float("-inf")

    async def leave(self, queue: SpawnQueue) -> None:
        if queue.session is None:
            return  # a pool's channel may serve other workers of this process
        state = self._queues.pop(queue, None)
        if state is not None:
            await self._core.unwatch(state.channel)


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

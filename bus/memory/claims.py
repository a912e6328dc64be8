"""Spawn requests in process, from a worker's side: the same lease rules as on Redis."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from baton.bus.errors import InvalidEnvelope
from baton.bus.memory.core import ROUTES, MemoryCore, spawn_channel
from baton.bus.memory.streams import Stream
from baton.bus.messages import parse_spawn_request
from baton.bus.parts.claims import Claims, SpawnClaim, SpawnQueue
from baton.bus.parts.dead import Quarantine
from baton.bus.parts.spawns import spawn_receipt, spawn_receipts_by_stream


class MemoryClaims(Claims):
    """Claims of one handle on the broker (its consumer name holds them)."""

    def __init__(self, core: MemoryCore, quarantine: Quarantine) -> None:
        self._core = core
        self._broker = core.broker
        self._quarantine = quarantine
        self._turns: dict[SpawnQueue, int] = {}  # which stream a claim looks at first

    async def claim(self, queue: SpawnQueue, *, timeout: float = 0.0) -> SpawnClaim | None:
        self._core.check_open()
        streams, _ = ROUTES.spawn_queue(queue)
        if not streams:  # a pool worker that knows no profile: nothing is ever for it
            await anyio.sleep(max(timeout, 0.0))
            return None
        watch = self._broker.hub.add(spawn_channel(streams[0]))
        deadline = anyio.current_time() + timeout  # bounds the waiting, as on Redis
        while True:
            mark = watch.generation
            claim = await self._claim_from(queue, streams)
            if claim is not None:
                return claim
            left = deadline - anyio.current_time()
            if left <= 0:
                return None
            # Expired leases free up without a wake-up: look again at least once a lease.
            await watch.wait(min(left, self._core.options.lease_s), since=mark)
            self._core.check_open()

    async def _claim_from(self, queue: SpawnQueue, streams: tuple[str, ...]) -> SpawnClaim | None:
        """The first valid request of the queue's streams, starting at a rotating one; what
        is not a request, or sits in a stream it does not belong in, goes to the dead letters."""
        first = self._turns.get(queue, 0) % len(streams)
        self._turns[queue] = first + 1
        for stream in streams[first:] + streams[:first]:
            source = self._broker.spawn_stream(stream)
            while taken := source.take(self._core.consumer, 1, self._core.options.lease_s):
                ((entry_id, raw),) = taken
                try:
                    request = parse_spawn_request(raw)
                    ROUTES.check_spawn_stream(request, stream, queue, raw)
                except InvalidEnvelope as exc:
                    source.done([entry_id])
                    await self._quarantine(exc, source=stream, session=None, raw=raw)
                    continue
                return SpawnClaim(spawn_receipt(stream, str(entry_id)), request)
        return None

    def _entries(self, receipts: Sequence[str]) -> list[tuple[str, Stream, list[int]]]:
        return [
            (name, self._broker.spawn_stream(name), [int(i) for i in ids])
            for name, ids in spawn_receipts_by_stream(receipts).items()
        ]

    async def renew(self, receipts: Sequence[str]) -> list[str]:
        now = anyio.current_time()
        held: list[str] = []
        for name, stream, entry_ids in self._entries(receipts):
            for entry_id in entry_ids:
                owner = stream.pending.get(entry_id)
                if owner is not None and owner[0] == self._core.consumer:
                    stream.pending[entry_id] = (owner[0], now)
                    held.append(spawn_receipt(name, str(entry_id)))
        return held

    async def ack(self, receipts: Sequence[str]) -> None:
        for _, stream, entry_ids in self._entries(receipts):
            stream.done(entry_ids)

    async def release(self, receipts: Sequence[str]) -> None:
        for name, stream, entry_ids in self._entries(receipts):
            stream.release(entry_ids, owner=self._core.consumer)
            self._broker.hub.wake(spawn_channel(name))

    async def leave(self, queue: SpawnQueue) -> None:
        if queue.session is not None:
            streams, _ = ROUTES.spawn_queue(queue)
            self._broker.hub.remove(spawn_channel(streams[0]))
            self._turns.pop(queue, None)

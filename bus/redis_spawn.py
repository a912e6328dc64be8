"""The spawn queue on Redis: one stream (``baton:spawn``) with one consumer group of workers.

A claim is a delivery to this worker; its lease is renewed while the agent runs (only where it is
still ours: :file:`scripts/renew_if_mine.lua`), acked when the agent is done for good, and handed
back at once on a graceful drain. The stream's name is also the wake-up channel idle workers
wait on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio

from baton.bus.base import SpawnClaim
from baton.bus.errors import InvalidEnvelope
from baton.bus.keys import SPAWN_GROUP
from baton.bus.messages import SpawnRequest, parse_spawn_request
from baton.bus.redis_batch import Command
from baton.bus.redis_core import DeadLetterSink, Entry, RedisCore, read_entries, stream_entries
from baton.bus.redis_inbox import RELEASED_IDLE_MS
from baton.bus.redis_scripts import RENEW_IF_MINE
from baton.bus.wake import RELEASED


class RedisSpawnQueue:
    """The spawn-queue half of :class:`baton.bus.redis.RedisBus`, for this bus's consumer."""

    def __init__(self, core: RedisCore, dead_letter: DeadLetterSink) -> None:
        self._core = core
        self._dead_letter = dead_letter
        self._epoch = -1  # the fault epoch in which we last re-read our own pending claims
        self._held: set[str] = set()
        self._expiry_checked_at = float("-inf")
        self._releases_seen = 0

    async def submit(self, request: SpawnRequest) -> str:
        key = self._core.keys.spawn
        return await self._core.append(key, "req", request.model_dump_json(), key)

    async def claim(self, *, timeout: float) -> SpawnClaim | None:
        core = self._core
        key = core.keys.spawn
        watch = await core.watch(key)
        await core.ensure_group(key, SPAWN_GROUP)
        with anyio.move_on_after(timeout):
            while True:
                mark = watch.generation
                if watch.releases != self._releases_seen:  # someone handed work back
                    self._releases_seen = watch.releases
                    self._expiry_checked_at = float("-inf")
                claim = await self._claim_one(key)
                if claim is not None:
                    return claim
                if timeout <= 0:
                    return None
                # Expired leases free up without a wake-up: look again at least once a lease.
                await watch.wait(min(timeout, core.options.lease_s), since=mark)
                core.check_open()
        return None

    async def _claim_one(self, key: str) -> SpawnClaim | None:
        """The next valid request; malformed ones met on the way go to the dead letters."""
        while True:
            claim, rejected = await self._claim_round(key)
            if claim is not None or not rejected:
                return claim

    async def _claim_round(self, key: str) -> tuple[SpawnClaim | None, bool]:
        core = self._core
        rejected = False
        entries: list[Entry] = []
        if self._epoch != core.epoch:
            self._epoch = core.epoch
            mine = await core.own_pending(key, SPAWN_GROUP, core.consumer)
            entries = [e for e in mine if e[0] not in self._held]
        if not entries:
            entries = await self._take(key)
        for entry_id, fields in entries:
            raw = (fields or {}).get("req")
            try:
                if raw is None:
                    raise InvalidEnvelope("spawn entry has no 'req' field")
                request = parse_spawn_request(raw)
            except InvalidEnvelope as exc:
                await self._dead_letter(exc, source=key, session=None, raw=raw or str(fields))
                await core.ack(key, SPAWN_GROUP, [entry_id])
                rejected = True
                continue
            self._held.add(entry_id)
            return SpawnClaim(entry_id, request), rejected
        return None, rejected

    async def _take(self, key: str) -> list[Entry]:
        """One request whose claimant's lease expired, else one nobody has claimed yet.

        The spawn queue's pending list holds a claim for every agent running anywhere, so a
        cursor walk of it per claim (XAUTOCLAIM) would make starting n agents cost n². Instead
        Redis finds an expired one itself (XPENDING ... IDLE), at most every quarter lease
        while none turns up, and XCLAIM with the same minimum idle time takes it only if it is
        still expired.
        """
        core = self._core
        lease_ms = int(core.options.lease_s * 1000)
        now = time.monotonic()
        while now - self._expiry_checked_at >= core.options.lease_s / 4:
            idle = await core.one("XPENDING", key, SPAWN_GROUP, "IDLE", lease_ms, "-", "+", 1)
            if not idle:
                self._expiry_checked_at = now
                break
            reply = await core.one("XCLAIM", key, SPAWN_GROUP, core.consumer, lease_ms, idle[0][0])
            taken = [e for e in stream_entries(reply) if e[1] is not None]
            if taken:
                return taken
        read: Command = ("XREADGROUP", "GROUP", SPAWN_GROUP, core.consumer, "COUNT", 1)
        return read_entries(await core.one(*read, "STREAMS", key, ">"))

    async def renew(self, receipts: Sequence[str]) -> list[str]:
        if not receipts:
            return []
        core = self._core
        command = RENEW_IF_MINE.call(core.keys.spawn, SPAWN_GROUP, core.consumer, *receipts)
        held = [str(r) for r in await core.one(*command)]
        self._held.difference_update(set(receipts) - set(held))
        return held

    async def ack(self, receipts: Sequence[str]) -> None:
        if receipts:
            await self._core.ack(self._core.keys.spawn, SPAWN_GROUP, receipts)
            self._held.difference_update(receipts)

    async def release(self, receipts: Sequence[str]) -> None:
        if not receipts:
            return
        core = self._core
        key = core.keys.spawn
        idle = ("IDLE", RELEASED_IDLE_MS, "JUSTID")
        await core.call(
            ("XCLAIM", key, SPAWN_GROUP, core.consumer, 0, *receipts, *idle),
            ("PUBLISH", key, RELEASED),
        )
        self._held.difference_update(receipts)
        self._expiry_checked_at = float("-inf")

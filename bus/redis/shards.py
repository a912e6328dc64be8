"""Wake-ups on a Redis Cluster: sharded pub/sub (``SSUBSCRIBE``/``SPUBLISH``, Redis 7.0 on), one
connection per master, each channel subscribed on the master that owns its slot.

Classic pub/sub on a cluster broadcasts every message to every node over the cluster bus, so
each node carries every wake-up of the whole deployment; a shard channel's message stays on the
shard that owns it. A wake-up channel carries the hash tag of the key it announces (an inbox's
channel its session's), so the script that appends an entry publishes on a channel of its own
slot, on the same node, in the same step (:mod:`baton.bus.redis.scripts`).

The guarantees are one node's (:mod:`baton.bus.redis.wake`, whose dispatcher runs once per
master here, over one shared hub of watches): a channel counts as watched once its owner
confirmed the ``SSUBSCRIBE``, and whenever a channel changes hands (a failover, a slot moved)
its reader is woken once the new owner confirmed, so it looks at its stream itself. A dropped
connection, or a node that drops a channel on its own (Redis sends ``sunsubscribe`` when the
slot leaves it), has the slot map read again and every channel re-homed by it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus
from redis.asyncio import Redis

from baton.bus.errors import BusUnreachable, redact_url
from baton.bus.redis.adapter import FAULTS, pubsub_client
from baton.bus.redis.cluster import ClusterRouter, node_url
from baton.bus.redis.slots import Address, slot_of
from baton.bus.redis.wake import WakeDispatcher
from baton.bus.wake import WakeHub, Watch

log = logging.getLogger(__name__)


class _Home:
    """The channels one master's dispatcher serves (:class:`~baton.bus.redis.wake.Shard`)."""

    def __init__(self, owner: ShardedWake) -> None:
        self._owner = owner
        self.members: set[str] = set()

    def any(self) -> bool:
        return bool(self.members)

    def channels(self) -> list[str]:
        return sorted(self.members)

    def unsubscribed(self, channel: str) -> None:
        if channel in self.members:
            self._owner.topology_changed()


class ShardedWake:
    """The cluster's counterpart of :class:`~baton.bus.redis.wake.WakeDispatcher` (``run``,
    ``watch``, ``unwatch``, ``aclose``): one dispatcher per master, a channel watched on its
    slot's master."""

    def __init__(
        self,
        router: ClusterRouter,
        hub: WakeHub,
        *,
        client_name: str,
        on_fault: Callable[[], None],
    ) -> None:
        self._router = router
        self._hub = hub
        self._client_name = client_name
        self._on_fault = on_fault
        self._url = redact_url(router.url)
        self._shards: dict[Address, tuple[WakeDispatcher, _Home, Redis]] = {}
        self._where: dict[str, Address] = {}
        self._group: TaskGroup | None = None
        self._changed = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as group:
            self._group = group
            for address in self._router.masters():
                self._shard(address)
            task_status.started()
            await self._rehome_forever()

    def _shard(self, address: Address) -> tuple[WakeDispatcher, _Home, Redis]:
        shard = self._shards.get(address)
        if shard is None:
            home = _Home(self)
            url = node_url(self._router.url, address)
            client = pubsub_client(url, client_name=self._client_name)
            dispatcher = WakeDispatcher(
                client,
                self._hub,
                url=url,
                on_fault=self._fault,
                shard=home,
            )
            shard = self._shards[address] = (dispatcher, home, client)
            if self._group is not None:
                self._group.start_soon(
                    dispatcher.run, name=f"wake-ups from {address[0]}:{address[1]}"
                )
        return shard

    def _fault(self) -> None:
        self._on_fault()
        self.topology_changed()

    def topology_changed(self) -> None:
        """A node was lost or dropped a channel: read the map again and move what moved."""
        self._changed.set()

    async def _rehome_forever(self) -> None:
        backoff = 0.05
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            self._router.fault()
            try:
                await self._router.refresh()
            except FAULTS as exc:
                log.debug("reading the slot map failed: %s", exc)
                await anyio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 2.0)
                self._changed.set()
                continue
            backoff = 0.05
            self._rehome()
            # A burst of faults (every connection to a dead master) is one change.
            await anyio.sleep(0.05)

    def _rehome(self) -> None:
        moved = 0
        for channel, was in list(self._where.items()):
            now = self._owner(channel)
            if now is None or now == was:
                continue
            old_dispatcher, old_home, _ = self._shard(was)
            old_home.members.discard(channel)
            old_dispatcher.release(channel)
            new_dispatcher, new_home, _ = self._shard(now)
            new_home.members.add(channel)
            self._where[channel] = now
            new_dispatcher.adopt(channel)
            moved += 1
        if moved:
            log.info("%d wake-up channels moved to their slots' new masters", moved)

    def _owner(self, channel: str) -> Address | None:
        return self._router.slots.node_for(slot_of(channel))

    async def watch(self, channel: str) -> Watch:
        """Subscribe on the channel's master and wait until it confirmed; ``BusUnreachable``
        when no master is known for it."""
        address = self._where.get(channel)
        if address is None:
            if self._router.slots.stale:
                try:
                    await self._router.refresh()
                except FAULTS as exc:
                    raise BusUnreachable(self._url, str(exc) or type(exc).__name__) from exc
            address = self._owner(channel)
            if address is None:
                raise BusUnreachable(self._url, f"no master serves the slot of {channel}")
            self._where[channel] = address
        dispatcher, home, _ = self._shard(address)
        home.members.add(channel)
        return await dispatcher.watch(channel)

    async def unwatch(self, *channels: str) -> None:
        """Stop watching the channels: one ``SUNSUBSCRIBE`` wait per master they are on."""
        by_master: dict[Address, list[str]] = {}
        for channel in channels:
            address = self._where.pop(channel, None)
            if address is not None:
                by_master.setdefault(address, []).append(channel)
        for address, theirs in by_master.items():
            dispatcher, home, _ = self._shard(address)
            home.members.difference_update(theirs)
            await dispatcher.unwatch(*theirs)

    async def aclose(self) -> None:
        shards, self._shards = self._shards, {}
        for dispatcher, _, client in shards.values():
            await dispatcher.aclose()
            await client.aclose()

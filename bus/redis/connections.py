"""The clients of one Redis bus, for the topology its URL names.

One server: a pool of command connections with a batcher in front (commands issued at the same
moment share a round trip, :mod:`baton.bus.redis.batch`) and one pub/sub connection read by the
wake-up dispatcher (:mod:`baton.bus.redis.wake`). A cluster: the router that sends each command to
the master of its slot (:mod:`baton.bus.redis.cluster`) and one pub/sub connection per shard
(:mod:`baton.bus.redis.shards`). Chosen once, here, so that the core above them speaks to
``batcher`` and ``dispatcher`` alike whichever it got.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from redis.asyncio import Redis

from baton.bus.redis.adapter import CommandPool, pubsub_client
from baton.bus.redis.batch import CommandBatcher
from baton.bus.redis.cluster import ClusterRouter, is_cluster_url
from baton.bus.redis.shards import ShardedWake
from baton.bus.redis.wake import WakeDispatcher
from baton.bus.wake import WakeHub


class Connections:
    """The command and wake-up clients of one bus: ``batcher`` runs commands, ``dispatcher``
    delivers wake-ups to ``hub``'s watches, ``cluster`` is the router on a cluster (None on
    one server). ``on_fault`` hears of every fault the dispatcher meets (the core's epoch)."""

    __slots__ = ("_pool", "_pubsub", "batcher", "cluster", "dispatcher")

    def __init__(
        self,
        url: str,
        hub: WakeHub,
        *,
        connections: int,
        client_name: str,
        on_fault: Callable[[], None],
    ) -> None:
        self.cluster: ClusterRouter | None = None
        self._pool: CommandPool | None = None
        self._pubsub: Redis | None = None
        self.batcher: CommandBatcher | ClusterRouter
        self.dispatcher: WakeDispatcher | ShardedWake
        if is_cluster_url(url):
            self.cluster = ClusterRouter(url, connections=connections, client_name=client_name)
            self.batcher = self.cluster
            self.dispatcher = ShardedWake(
                self.cluster, hub, client_name=client_name, on_fault=on_fault
            )
        else:
            self._pool = CommandPool(url, connections=connections, client_name=client_name)
            self.batcher = CommandBatcher(self._pool, connections=connections)
            self._pubsub = pubsub_client(url, client_name=client_name)
            self.dispatcher = WakeDispatcher(self._pubsub, hub, url=url, on_fault=on_fault)

    async def aclose(self) -> None:
        """Close every client, shielded: a cancelled owner still leaves no socket open."""
        with anyio.CancelScope(shield=True):
            await self.batcher.aclose()
            await self.dispatcher.aclose()
            if self._pubsub is not None:
                await self._pubsub.aclose()
            if self._pool is not None:
                await self._pool.aclose()

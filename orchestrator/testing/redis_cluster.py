"""A throwaway Redis Cluster for tests and benchmarks: real ``redis-server`` nodes in cluster mode
on loopback ports, joined as ``redis-cli --cluster create`` joins them (3 masters with a replica
each by default), stopped on exit.

It is the cluster a deployment runs, not a model of one: slots, ``MOVED`` and ``ASK`` replies,
sharded pub/sub and failover (a master killed, its replica promoted after
``node_timeout_ms``) all come from Redis itself.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Self

import redis

from baton.errors import ConfigError
from baton.testing.redis_server import RedisServer

SLOTS = 16384
"""Hash slots of a Redis Cluster."""


class RedisCluster:
    """Owns the nodes of one cluster; :attr:`url` is a ``redis+cluster://`` bus URL naming every
    master as a seed."""

    def __init__(
        self,
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 1000,
        appendfsync: str = "everysec",
    ) -> None:
        """``appendfsync="everysec"``, the production setting: what a killed master had not
        written to disk, its replica holds (an fsync per write costs each write milliseconds)."""
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        options = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            # A replica promoted however long it was cut off: a test's failover must happen.
            "--cluster-replica-validity-factor", "0",
            # A new cluster is ready in ~2 s, not ~10: a master starts a replica's first sync
            # at once (the default waits 5 s for more replicas to share a diskless transfer),
            # and CLUSTER SLOTS lists a replica only once its replication offset moved, which on
            # an empty master takes its first PING to the replicas (each second, not each 10).
            "--repl-diskless-sync-delay", "0",
            "--repl-ping-replica-period", "1",
        ]  # fmt: skip
        # Each node's cluster bus gets a free port of its own, picked again with the node's
        # when either was taken (RedisServer's cluster_bus).
        self.nodes = [
            RedisServer(appendfsync=appendfsync, extra_args=options, cluster_bus=True)
            for _ in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        seeds = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"redis+cluster://{seeds}/0"

    def client(self, node: RedisServer) -> redis.Redis:
        return redis.Redis(port=node.port, decode_responses=True, socket_timeout=5)

    def start(self) -> None:
        """Start every node, join them, and return once every node says the cluster is ok."""
        for node in self.nodes:
            node.start()
        self._create()
        self.wait_ok()
        self._wait_replicas()

    def _create(self, timeout_s: float = 30.0) -> None:
        """What ``redis-cli --cluster create --cluster-replicas N`` does, with the commands it
        sends (so no ``redis-cli`` is needed): the 16,384 slots split evenly over the first
        ``masters`` nodes, every node introduced to the first (``CLUSTER MEET``), and once all
        know each other, each other node made a replica of a master in turn."""
        masters, replicas = self.nodes[: self.masters], self.nodes[self.masters :]
        for epoch, node in enumerate(self.nodes, start=1):  # distinct, as redis-cli sets them
            with self.client(node) as client:
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
        for index, node in enumerate(masters):
            first = index * SLOTS // len(masters)
            last = (index + 1) * SLOTS // len(masters) - 1
            with self.client(node) as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        with self.client(self.nodes[0]) as client:
            for node in self.nodes[1:]:
                assert node.bus_port is not None
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, node.bus_port)
        master_ids = [self.node_id(node) for node in masters]
        deadline = time.monotonic() + timeout_s
        for index, node in enumerate(replicas):
            master = master_ids[index % len(masters)]
            with self.client(node) as client:
                while True:  # a node refuses to follow a master it has not heard of yet
                    try:
                        client.execute_command("CLUSTER", "REPLICATE", master)
                        break
                    except redis.ResponseError as exc:
                        if time.monotonic() > deadline:
                            raise ConfigError(f"the cluster did not form: {exc}") from exc
                        time.sleep(0.05)

    def _wait_replicas(self, timeout_s: float = 30.0) -> None:
        """Until every master lists its replicas and each replica's link to it is up: a
        replica still joining could not take over, nor hold a write (``WAIT``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.client(self.nodes[0]) as client:
                rows = self._slot_rows(client)
            listed = all(len(row) - 3 >= self.replicas for row in rows)
            linked = True
            for node in self.nodes:
                with self.client(node) as client:
                    info = client.info("replication")
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    linked = False
            if listed and linked:
                return
            if time.monotonic() > deadline:
                raise ConfigError(f"the replicas did not join within {timeout_s} s")
            time.sleep(0.05)

    def wait_ok(self, timeout_s: float = 30.0) -> None:
        """Until every running node reports ``cluster_state:ok`` and they agree on the masters,
        none of which is a node this object stopped or killed (after :meth:`kill_master`: once
        its replica took over).

        Polled: the state is another process's, and Redis offers no event to wait on."""
        gone = {node.port for node in self.nodes if not node.running}
        deadline = time.monotonic() + timeout_s
        while True:
            views = []
            try:
                for node in self.running():
                    with self.client(node) as client:
                        info = client.execute_command("CLUSTER", "INFO")
                        if "cluster_state:ok" not in str(info):
                            raise ConfigError("not ok yet")
                        views.append(sorted(self._master_ports(client)))
                if views and all(view == views[0] for view in views) and not gone & set(views[0]):
                    return
            except (ConfigError, redis.RedisError):
                pass
            if time.monotonic() > deadline:
                raise ConfigError(f"the cluster did not settle within {timeout_s} s")
            time.sleep(0.05)

    def running(self) -> list[RedisServer]:
        return [node for node in self.nodes if node.running]

    @staticmethod
    def _slot_rows(client: redis.Redis) -> list[list[Any]]:
        """``CLUSTER SLOTS``: ``[[start, end, [host, port, id, ...], replicas...], ...]``."""
        rows: list[list[Any]] = client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        return rows

    @classmethod
    def _master_ports(cls, client: redis.Redis) -> list[int]:
        """The ports of the masters that serve slots, as ``client``'s node sees them."""
        return sorted({int(row[2][1]) for row in cls._slot_rows(client)})

    def master_nodes(self) -> list[RedisServer]:
        """The nodes that are masters now (with slots), as a running node sees it."""
        with self.client(self.running()[0]) as client:
            ports = set(self._master_ports(client))
        return [node for node in self.running() if node.port in ports]

    def kill_master(self, index: int = 0) -> RedisServer:
        """SIGKILL one master, as a crash would; its replica takes over after the node
        timeout (:meth:`wait_ok` returns once it has)."""
        node = self.master_nodes()[index]
        node.kill()
        return node

    def node_id(self, node: RedisServer) -> str:
        with self.client(node) as client:
            return str(client.execute_command("CLUSTER", "MYID"))

    def owner(self, slot: int) -> RedisServer:
        """The master serving ``slot`` now."""
        with self.client(self.running()[0]) as client:
            for row in self._slot_rows(client):
                if int(row[0]) <= slot <= int(row[1]):
                    port = int(row[2][1])
                    return next(node for node in self.nodes if node.port == port)
        raise ConfigError(f"no node serves slot {slot}")

    def move_slot(self, slot: int, to: RedisServer) -> None:
        """Migrate one slot, keys and all, to another master, the way ``redis-cli --cluster
        reshard`` does (``SETSLOT IMPORTING``/``MIGRATING``, ``MIGRATE``, ``SETSLOT NODE``):
        clients that still send to the old master get ``MOVED``."""
        source = self.owner(slot)
        source_id, target_id = self.node_id(source), self.node_id(to)
        with self.client(source) as old, self.client(to) as new:
            new.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            old.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            while keys := old.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                old.execute_command("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys)
        for node in self.master_nodes():
            with self.client(node) as client:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def stop(self) -> None:
        for node in self.nodes:
            node.__exit__(None, None, None)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisNodes:
    """A benchmark's own look at Redis, beside the bus it measures: one node, or each master
    of a cluster (where wake-ups are shard channels)."""

    def __init__(self, ports: list[int], *, sharded: bool) -> None:
        self.clients = [redis.Redis(port=port, decode_responses=True) for port in ports]
        self.sharded = sharded

    @classmethod
    def of_cluster(cls, cluster: RedisCluster) -> RedisNodes:
        return cls([node.port for node in cluster.master_nodes()], sharded=True)

    @classmethod
    def of_url(cls, url: str) -> RedisNodes:
        with redis.Redis.from_url(url) as client:
            port = int(client.connection_pool.connection_kwargs["port"])
        return cls([port], sharded=False)

    def watched(self, pattern: str) -> int:
        """Wake-up channels subscribed (``PUBSUB SHARDCHANNELS`` on each master of a cluster,
        ``PUBSUB CHANNELS`` on one node)."""
        kind = "SHARDCHANNELS" if self.sharded else "CHANNELS"
        found = 0
        for client in self.clients:
            channels: list[str] = client.execute_command("PUBSUB", kind, pattern)  # type: ignore[no-untyped-call]
            found += len(channels)
        return found

    def baton_connections(self) -> int:
        """baton's connections on the busiest node: its clients are named ``baton:...`` (not
        this look's, nor a replica's link)."""
        return max(
            sum(1 for c in client.client_list() if str(c.get("name", "")).startswith("baton:"))
            for client in self.clients
        )

    def close(self) -> None:
        for client in self.clients:
            client.close()


__all__ = ["RedisCluster", "RedisNodes"]

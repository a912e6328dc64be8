"""Commands on a Redis Cluster: each routed to the master that serves its slot, pipelined per
node the way one node's are (:class:`~baton.bus.redis.batch.CommandBatcher`, one per master).

An operation is a short list of commands, and each is routed on its own: the commands of one
operation that share a slot (nearly always all of them: a session's keys carry its hash tag) go
in one round trip to one node, and an operation that also touches a key elsewhere (the sessions'
index) has that command sent to its own node in the same moment. A multi-key command or a Lua
script must keep its keys in one slot, which baton's key layout does (``docs/bus.md``); Redis
refuses one that does not (``CROSSSLOT``).

The slot map comes from ``CLUSTER SLOTS`` (:mod:`baton.bus.redis.slots`). A ``MOVED`` reply
corrects one slot and sends the command on; ``ASK`` sends it once to the importing node after
``ASKING``; a fault or a ``CLUSTERDOWN``/``TRYAGAIN`` marks the map stale, and the core retries
the operation with backoff, reading the map again first (from any node that answers: after a
failover the dead master's replica serves its slots).

Why by hand rather than redis-py's ``RedisCluster``: its pipeline sends each call's commands
apart from every other caller's, so a thousand agents would cost a thousand round trips where
the batcher sends a handful; and its error replies lose the codes the bus branches on. What is
redis-py's here: the connections, the reply parser and the slot function.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
from anyio.abc import TaskGroup, TaskStatus

from baton.bus.errors import BusError
from baton.bus.redis.adapter import (
    FAULTS,
    Ask,
    ClusterUnsettled,
    CommandPool,
    Moved,
    RedisRefused,
    unsettled,
)
from baton.bus.redis.batch import Command, CommandBatcher
from baton.bus.redis.scripts import SCRIPTS, SHARDED
from baton.bus.redis.slots import Address, SlotMap, routing_key, slot_of
from baton.errors import ConfigError

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
"""``MOVED``/``ASK`` hops one command may take before the operation fails as a fault (the map
is then read again and the core retries): more means the cluster is resharding under us."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme.lower() in CLUSTER_SCHEMES


def seed_addresses(url: str) -> list[Address]:
    """The nodes a ``redis+cluster://HOST:PORT[,HOST:PORT...]/0`` URL names (port 6379 where
    none is given)."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    seeds: list[Address] = []
    for part in filter(None, netloc.split(",")):
        host, colon, port = part.rpartition(":")
        if not colon or not port.isdigit():
            host, port = part, "6379"
        seeds.append((host.strip("[]"), int(port)))
    if not seeds:
        raise BusError(f"no node in the cluster URL {url!r}")
    return seeds


REPLICAS_QUERY = "replicas"
"""The cluster URL's query parameter: how many replicas a write waits for (``WAIT``); 1 unless
the URL says (``redis+cluster://h:7000/0?replicas=0``: replication left asynchronous)."""

REPLICA_WAIT_MS = 1000
"""How long one ``WAIT`` may hold its node's connection: a master whose replica is gone then
goes on without it (a failover of that master could lose what it wrote meanwhile)."""

NO_WAIT = frozenset({
    "CLUSTER", "EXISTS", "GET", "HGET", "HGETALL", "HMGET", "PING", "PTTL", "SCAN", "SCRIPT",
    "TTL", "TYPE", "XINFO", "XLEN", "XPENDING", "XRANGE", "XREVRANGE", "ZCARD", "ZRANGE",
    "ZRANGEBYSCORE", "ZREVRANGE", "ZSCORE", "ASKING", "WAIT",
    # Writes a failover may lose at no cost but a repeat: a delivery (the entry is delivered
    # again, and readers drop repeats by envelope id) or a claim of a lapsed lease.
    "XREADGROUP", "XAUTOCLAIM", "XCLAIM",
})  # fmt: skip
"""Commands after which a write need not wait for a replica: an operation of only these
sends no ``WAIT``."""


def replicas_wanted(url: str) -> int:
    for name, value in parse_qsl(urlsplit(url).query):
        if name == REPLICAS_QUERY:
            if not value.isdigit():
                raise ConfigError(f"{REPLICAS_QUERY}={value!r} in the cluster URL: use a count")
            return int(value)
    return 1


def node_url(url: str, address: Address) -> str:
    """The single-node URL of one node: the cluster URL's scheme without ``+cluster``, its
    credentials and query (TLS files), that node's address, database 0 (a cluster has no
    other)."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    host, port = address
    shown = f"[{host}]" if ":" in host else host
    netloc = f"{userinfo}{at}{shown}:{port}"
    scheme = CLUSTER_SCHEMES[parts.scheme.lower()]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != REPLICAS_QUERY], safe="/")
    return urlunsplit((scheme, netloc, "/0", query, ""))


def sharded(command: Command) -> Command:
    """The command as a cluster runs it: wake-ups published to the shard that owns the channel
    (``SPUBLISH``, and each waking script's ``SPUBLISH`` twin), which is where its readers are
    subscribed (:mod:`baton.bus.redis.shards`). Anything else goes as it is."""
    name = command[0]
    if name == "PUBLISH":
        return ("SPUBLISH", *command[1:])
    if name == "EVALSHA":
        twin = SHARDED.get(str(command[1]))
        if twin is not None:
            return ("EVALSHA", twin.sha, *command[2:])
    elif name == "SCRIPT" and len(command) == 3 and isinstance(command[2], bytes):
        for script in SCRIPTS:
            if script.body == command[2]:
                return ("SCRIPT", "LOAD", script.sharded.body)
    return command


class NoNodeAnswered(ClusterUnsettled):
    """No node the cluster URL names (nor any met since) answered ``CLUSTER SLOTS``: a fault,
    saying how many were tried and the last one's error, in one line."""

    def __init__(self, tried: Sequence[Address], last: BaseException | None) -> None:
        shown = ", ".join(f"{host}:{port}" for host, port in tried[:6])
        more = f" and {len(tried) - 6} more" if len(tried) > 6 else ""
        why = f": {str(last) or type(last).__name__}" if last is not None else ""
        super().__init__(f"no cluster node answered (tried {shown}{more}){why}")


class _Node:
    """One master's connections and their batcher."""

    def __init__(self, url: str, address: Address, *, connections: int, client_name: str) -> None:
        self.address = address
        self.pool = CommandPool(url, connections=connections, client_name=client_name)
        self.batcher = CommandBatcher(self.pool, connections=connections)
        self.scope: anyio.CancelScope | None = None


class ClusterRouter:
    """What :class:`~baton.bus.redis.core.RedisCore` sends commands through on a cluster: the
    same calls as a :class:`CommandBatcher` (``call``, ``everywhere``, ``run``, ``fail_all``,
    ``aclose``), routed per command."""

    def __init__(self, url: str, *, connections: int, client_name: str) -> None:
        self.url = url
        self._connections = connections
        self._client_name = client_name
        self._seeds = seed_addresses(url)
        self._replicas = replicas_wanted(url)
        self.slots = SlotMap()
        self._nodes: dict[Address, _Node] = {}
        self._group: TaskGroup | None = None
        self._refresh_lock = anyio.Lock()
        self._failed: BaseException | None = None
        self.answered = False
        """Whether a node has ever answered (the map was read once): from then on the cluster
        is there, and a fault at start-up is a failover to wait out, not a wrong URL."""

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run each node's flushers (started as nodes become known) until cancelled."""
        async with anyio.create_task_group() as group:
            self._group = group
            for node in self._nodes.values():
                await self._start(node)
            task_status.started()
            await anyio.sleep_forever()

    async def _start(self, node: _Node) -> None:
        if self._group is not None and node.scope is None:
            node.scope = anyio.CancelScope()
            await self._group.start(self._run_node, node)

    @staticmethod
    async def _run_node(node: _Node, *, task_status: TaskStatus[None]) -> None:
        assert node.scope is not None
        with node.scope:
            await node.batcher.run(task_status=task_status)

    def fail_all(self, error: BaseException) -> None:
        self._failed = error
        for node in self._nodes.values():
            node.batcher.fail_all(error)

    async def aclose(self) -> None:
        for node in list(self._nodes.values()):
            await node.batcher.aclose()
            await node.pool.aclose()

    # -- the slot map ----------------------------------------------------------------------

    def fault(self) -> None:
        """A fault somewhere: the map may be out of date (a failover), read it again."""
        self.slots.stale = True

    async def refresh(self) -> None:
        """Read the slot map from the first node that answers: the masters known, the other
        nodes met, then every node the URL names, in its order (a dead node first in the URL
        costs one refused connection). A node that answers that it is still loading its data or
        that the cluster is down is passed over like one that does not answer. Raises
        :class:`NoNodeAnswered` (a fault) when none answers."""
        async with self._refresh_lock:
            if not self.slots.stale:
                return
            candidates = self._candidates()
            last: BaseException | None = None
            for address in candidates:
                try:
                    reply = await self._node(address).batcher.call(("CLUSTER", "SLOTS"))
                except FAULTS as exc:
                    last = exc
                    continue
                except RedisRefused as exc:
                    if (fault := unsettled(exc)) is None:
                        raise
                    last = fault
                    continue
                self.slots.load(reply[0])
                self.answered = True
                for master in self.slots.masters():
                    await self._start(self._node(master))
                return
            raise NoNodeAnswered(candidates, last) from last

    def _candidates(self) -> list[Address]:
        known = self.slots.masters()
        others = [address for address in self._nodes if address not in known]
        seeds = [address for address in self._seeds if address not in known + others]
        return known + others + seeds

    def _node(self, address: Address) -> _Node:
        node = self._nodes.get(address)
        if node is None:
            url = node_url(self.url, address)
            node = _Node(url, address, connections=self._connections, client_name=self._client_name)
            if self._failed is not None:
                node.batcher.fail_all(self._failed)
            self._nodes[address] = node
        return node

    async def _where(self, command: Command) -> _Node:
        key = routing_key(command)
        address = self.slots.node_for(slot_of(key)) if key is not None else None
        if address is None:
            masters = self.slots.masters()
            if not masters:
                raise ClusterUnsettled("no master serves any slot")
            address = masters[0]
        node = self._node(address)
        await self._start(node)
        return node

    def masters(self) -> list[Address]:
        return self.slots.masters()

    # -- commands --------------------------------------------------------------------------

    async def call(self, *commands: Command) -> list[Any]:
        """Run the commands, each on the master of its slot, and return their replies in order;
        the first error reply among them is raised (as a ``CommandBatcher`` does)."""
        replies = await self.call_replies(*commands)
        for reply in replies:
            if isinstance(reply, RedisRefused):
                raise reply
        return replies

    async def call_replies(self, *commands: Command) -> list[Any]:
        if self.slots.stale:
            await self.refresh()
        commands = tuple(sharded(command) for command in commands)
        replies: list[Any] = [None] * len(commands)
        pending = list(range(len(commands)))
        for _ in range(MAX_REDIRECTS):
            by_node: dict[_Node, list[int]] = {}
            for index in pending:
                by_node.setdefault(await self._where(commands[index]), []).append(index)
            pending = []
            if len(by_node) == 1:
                [(node, indexes)] = by_node.items()
                await self._send(node, commands, indexes, replies, pending)
            else:
                await self._send_apart(by_node, commands, replies, pending)
            if not pending:
                return replies
        self.fault()
        raise ClusterUnsettled(f"more than {MAX_REDIRECTS} redirects: the cluster is resharding")

    async def _send_apart(
        self,
        by_node: dict[_Node, list[int]],
        commands: Sequence[Command],
        replies: list[Any],
        redirected: list[int],
    ) -> None:
        """Each node's share of one operation, in the same moment; the first failure is raised
        as itself (not wrapped in an exception group: the core retries faults by type)."""
        failures: list[Exception] = []

        async def send(node: _Node, indexes: list[int]) -> None:
            try:
                await self._send(node, commands, indexes, replies, redirected)
            except Exception as exc:
                failures.append(exc)

        async with anyio.create_task_group() as group:
            for node, indexes in by_node.items():
                group.start_soon(send, node, indexes)
        if failures:
            raise failures[0]

    async def _send(
        self,
        node: _Node,
        commands: Sequence[Command],
        indexes: list[int],
        replies: list[Any],
        redirected: list[int],
    ) -> None:
        mine = [commands[index] for index in indexes]
        replicas = min(self._replicas, self.slots.replicas(node.address))
        if replicas and any(str(command[0]).upper() not in NO_WAIT for command in mine):
            # Replication is asynchronous: a master that dies before its replica has a write
            # takes it along, though the write was answered. WAIT, in the same round trip,
            # holds the answer until a replica has it too.
            *answers, acked = await node.batcher.call_replies(
                *mine, ("WAIT", replicas, REPLICA_WAIT_MS)
            )
            if not isinstance(acked, int) or acked < replicas:
                self.fault()  # a replica is gone: read the map again, so as not to wait on it
        else:
            answers = await node.batcher.call_replies(*mine)
        for index, answer in zip(indexes, answers, strict=True):
            if isinstance(answer, Moved):
                self.slots.move(answer.slot, answer.address)
                redirected.append(index)
            elif isinstance(answer, Ask):
                target = self._node(answer.address)
                await self._start(target)
                asked = await target.batcher.call_replies(("ASKING",), commands[index])
                replies[index] = asked[1]
            elif isinstance(answer, RedisRefused) and (fault := unsettled(answer)) is not None:
                self.fault()
                raise fault
            else:
                replies[index] = answer

    async def everywhere(self, *commands: Command) -> None:
        """Run keyless commands on every master (``SCRIPT LOAD``: each node has its own
        script cache)."""
        if self.slots.stale:
            await self.refresh()
        commands = tuple(sharded(command) for command in commands)
        for address in self.slots.masters():
            node = self._node(address)
            await self._start(node)
            await node.batcher.call(*commands)

    async def at(self, address: Address, *commands: Command) -> list[Any]:
        """Run commands on one node (a ``SCAN`` walks each master's keys with its own cursor)."""
        node = self._node(address)
        await self._start(node)
        return await node.batcher.call(*commands)

"""Where a command goes in a Redis Cluster: the key it is routed by, its slot, and which master
serves that slot now.

The map is read from ``CLUSTER SLOTS`` and corrected one slot at a time by ``MOVED`` replies
(:mod:`baton.bus.redis.cluster`); a fault or a refusal that says the cluster is changing marks it
stale, and the next operation reads it again. The slot of a key is redis-py's own CRC16
(``redis.crc.key_slot``), hash tags included.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from redis.crc import key_slot

from baton.bus.errors import BusError

Address = tuple[str, int]
"""A node's host and port, as ``CLUSTER SLOTS`` and ``MOVED`` name it."""

KEYLESS = frozenset({
    "ACL", "ASKING", "AUTH", "CLIENT", "CLUSTER", "COMMAND", "CONFIG", "DBSIZE", "ECHO",
    "FLUSHALL", "FLUSHDB", "HELLO", "INFO", "PING", "PUBLISH", "PUBSUB", "READONLY", "SCAN",
    "SCRIPT", "SELECT", "TIME",
})  # fmt: skip
"""Commands that name no key: any master answers them (``SCAN`` is sent to each in turn by its
caller; ``PUBLISH`` reaches every node of the cluster from any one)."""

_SUBCOMMAND_KEY = frozenset({"XINFO", "XGROUP", "OBJECT", "MEMORY"})
"""Commands whose key follows a subcommand (``XGROUP CREATE key ...``)."""


def routing_key(command: Sequence[Any]) -> str | bytes | None:
    """The key (or shard channel) that decides where ``command`` runs; None when it names none.

    Every multi-key command baton sends keeps its keys in one slot (a session's or a pool's hash
    tag), so the first key stands for them all; Redis refuses one that does not (``CROSSSLOT``).
    """
    name = str(command[0]).upper()
    if name in KEYLESS or len(command) < 2:
        return None
    if name in {"EVALSHA", "EVAL", "FCALL"}:
        return _key(command[3]) if int(command[2]) > 0 else None
    if name == "XREADGROUP" or name == "XREAD":
        upper = [str(arg).upper() if isinstance(arg, str) else "" for arg in command]
        return _key(command[upper.index("STREAMS") + 1])
    if name in _SUBCOMMAND_KEY:
        return _key(command[2]) if len(command) > 2 else None
    return _key(command[1])


def _key(arg: Any) -> str | bytes:
    return arg if isinstance(arg, (str, bytes)) else str(arg)


def slot_of(key: str | bytes) -> int:
    return int(key_slot(key.encode("utf-8", "surrogateescape") if isinstance(key, str) else key))


class SlotMap:
    """Which master serves each of the 16,384 slots, as far as this process knows."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, Address]] = []
        self._moved: dict[int, Address] = {}
        self._replicas: dict[Address, int] = {}
        self.stale = True

    def load(self, reply: Sequence[Any]) -> None:
        """Take a ``CLUSTER SLOTS`` reply: ``[[start, end, [host, port, id, ...], replicas...]]``.
        A reply that covers no slot (a node not joined yet) is refused."""
        ranges = sorted(
            (int(row[0]), int(row[1]), (str(row[2][0]), int(row[2][1]))) for row in reply
        )
        if not ranges:
            raise BusError("the Redis node is not part of a cluster that serves any slot")
        # CLUSTER SLOTS leaves out replicas the cluster marked failed
        self._replicas = {(str(row[2][0]), int(row[2][1])): len(row) - 3 for row in reply}
        self._ranges = ranges
        self._starts = [start for start, _, _ in ranges]
        self._moved = {}
        self.stale = False

    def node_for(self, slot: int) -> Address | None:
        """The master serving ``slot``, or None when no known range covers it."""
        moved = self._moved.get(slot)
        if moved is not None:
            return moved
        at = bisect.bisect_right(self._starts, slot) - 1
        if at >= 0:
            start, end, address = self._ranges[at]
            if start <= slot <= end:
                return address
        return None

    def move(self, slot: int, address: Address) -> None:
        """A ``MOVED`` reply: the slot is served elsewhere now (the rest of the map is read
        again soon, since one slot seldom moves alone)."""
        self._moved[slot] = address
        self.stale = True

    def replicas(self, address: Address) -> int:
        """How many live replicas the master has, as the map was read."""
        return self._replicas.get(address, 0)

    def masters(self) -> list[Address]:
        """Every master that serves a slot, in a stable order."""
        return sorted({address for _, _, address in self._ranges} | set(self._moved.values()))

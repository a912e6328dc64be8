"""The Redis bus's Lua scripts (``bus/redis/scripts/*.lua``), read once at import and called by SHA.

Each lives in its own ``.lua`` file so it can be read, linted and tried with ``redis-cli --eval``
as the Lua it is; the files ship as package data of ``baton.bus.redis``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib.resources import files

_PUBLISH = b"redis.call('PUBLISH',"
_SPUBLISH = b"redis.call('SPUBLISH',"


class Script:
    """A Lua script called by its SHA1 (``EVALSHA``): the body crosses the wire only when the
    server lacks it (after a restart), once, through ``SCRIPT LOAD``.

    A script that wakes a reader (``redis.call('PUBLISH', ...)``) has a twin for Redis Cluster,
    :attr:`sharded`, that wakes with ``SPUBLISH`` instead, so the wake-up goes only to the shard
    that owns the channel (the channel carries the key's hash tag, so it is in the script's
    slot). The cluster router sends the twin in its place (:mod:`baton.bus.redis.cluster`); the
    scripts are written once.
    """

    __slots__ = ("body", "name", "sha", "sharded")

    def __init__(self, name: str, body: bytes | None = None) -> None:
        self.name = name
        if body is None:
            body = (files("baton.bus.redis") / "scripts" / f"{name}.lua").read_bytes()
        self.body = body
        self.sha = hashlib.sha1(self.body).hexdigest()
        self.sharded: Script = self
        if _PUBLISH in body:
            self.sharded = Script(f"{name} (sharded)", body.replace(_PUBLISH, _SPUBLISH))

    def call(self, key: str, *args: str | int) -> tuple[str | int, ...]:
        """The command that runs the script on one key."""
        return ("EVALSHA", self.sha, 1, key, *args)

    def call_keys(self, keys: Sequence[str], *args: str | int) -> tuple[str | int, ...]:
        """The command that runs the script on several keys (one Cluster slot: a hash tag)."""
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    def load(self) -> tuple[str, str, bytes]:
        """The command that teaches the server the script."""
        return ("SCRIPT", "LOAD", self.body)


APPEND_AND_WAKE = Script("append_and_wake")
APPEND_ONCE = Script("append_once")
ACK_AND_DELETE = Script("ack_and_delete")
CLAIM_IF_MINE = Script("claim_if_mine")
CLAIM_SPAWN = Script("claim_spawn")
KEEP_LEASE = Script("keep_lease")
WITHDRAW_SPAWN = Script("withdraw_spawn")
SPEND = Script("spend")
HOLD_LEAD = Script("hold_lead")
SET_IF_OWNER = Script("set_if_owner")
RETIRE_SESSION = Script("retire_session")
DROP_CONSUMERS = Script("drop_consumers")
SPAWN_STATES = Script("spawn_states")
ANNOUNCE_WORKER = Script("announce_worker")
POOL_WORKERS = Script("pool_workers")
SEND_IF_RUNNING = Script("send_if_running")
SHARDED: dict[str, Script] = {}
"""Each script's SHA → its cluster twin, for the scripts that wake a reader."""
SCRIPTS = (
    APPEND_AND_WAKE,
    APPEND_ONCE,
    ACK_AND_DELETE,
    CLAIM_IF_MINE,
    CLAIM_SPAWN,
    KEEP_LEASE,
    WITHDRAW_SPAWN,
    SPEND,
    HOLD_LEAD,
    SET_IF_OWNER,
    RETIRE_SESSION,
    DROP_CONSUMERS,
    SPAWN_STATES,
    ANNOUNCE_WORKER,
    POOL_WORKERS,
    SEND_IF_RUNNING,
)
for _script in SCRIPTS:
    if _script.sharded is not _script:
        SHARDED[_script.sha] = _script.sharded

"""The Redis bus's Lua scripts (``bus/redis/scripts/*.lua``), read once at import and called by SHA.

Each lives in its own ``.lua`` file so it can be read, linted and tried with ``redis-cli --eval``
as the Lua it is; the files ship as package data of ``baton.bus.redis``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib.resources import files


class Script:
    """A Lua script called by its SHA1 (``EVALSHA``): the body crosses the wire only when the
    server lacks it (after a restart), once, through ``SCRIPT LOAD``."""

    __slots__ = ("body", "name", "sha")

    def __init__(self, name: str) -> None:
        self.name = name
        self.body = (files("baton.bus.redis") / "scripts" / f"{name}.lua").read_bytes()
        self.sha = hashlib.sha1(self.body).hexdigest()

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
RENEW_IF_MINE = Script("renew_if_mine")
CLAIM_SPAWN = Script("claim_spawn")
WITHDRAW_SPAWN = Script("withdraw_spawn")
SPEND = Script("spend")
HOLD_LEAD = Script("hold_lead")
RETIRE_SESSION = Script("retire_session")
DROP_CONSUMERS = Script("drop_consumers")
SPAWN_STATES = Script("spawn_states")
ANNOUNCE_WORKER = Script("announce_worker")
POOL_WORKERS = Script("pool_workers")
SEND_IF_RUNNING = Script("send_if_running")
SCRIPTS = (
    APPEND_AND_WAKE,
    APPEND_ONCE,
    ACK_AND_DELETE,
    RENEW_IF_MINE,
    CLAIM_SPAWN,
    WITHDRAW_SPAWN,
    SPEND,
    HOLD_LEAD,
    RETIRE_SESSION,
    DROP_CONSUMERS,
    SPAWN_STATES,
    ANNOUNCE_WORKER,
    POOL_WORKERS,
    SEND_IF_RUNNING,
)

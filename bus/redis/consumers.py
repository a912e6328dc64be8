"""Deleting the consumers of a consumer group that hold nothing.

Redis keeps every consumer name a group ever saw until it is deleted: each worker that died, each
``<consumer>:released`` name a hand-back used (1,800 after 600 sessions through one worker). But
``XGROUP DELCONSUMER`` drops a consumer's pending entries with it, so the check that its pending
list is empty and the delete are one script (:file:`scripts/drop_consumers.lua`): no entry can be
delivered to it in between. A live consumer deleted while it holds nothing is made again by its
next read. A session's own streams are swept when it ends (:mod:`baton.bus.redis.retention`);
the spawn streams of a pool, which outlive every session, by :class:`ConsumerSweeper`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from baton.bus.errors import BusError
from baton.bus.redis.core import RedisCore
from baton.bus.redis.scripts import DROP_CONSUMERS

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 60.0
"""How often one bus sweeps the same streams."""
IDLE_LEASES = 2
"""A consumer is deleted once idle this many leases: a live worker reads its streams at least
once a lease, so one deleted is nearly always one that is gone."""


async def drop_consumers(core: RedisCore, streams: Sequence[str], group: str, idle_ms: int) -> int:
    """Delete the consumers of ``group`` on ``streams`` (one Cluster slot) that hold nothing
    and were idle ``idle_ms`` or more; returns how many went."""
    if not streams:
        return 0
    return int(await core.one(*DROP_CONSUMERS.call_keys(streams, group, idle_ms)))


class ConsumerSweeper:
    """Sweeps streams now and then (at most every :data:`SWEEP_EVERY_S` each), for a part of
    the bus that reads them in a loop."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core
        self._swept: dict[tuple[str, ...], float] = {}

    async def now_and_then(self, streams: tuple[str, ...], group: str) -> int:
        """Sweep ``streams`` unless this bus did within the last minute. A sweep that fails is
        only logged: the claims go on, and the next sweep deletes what this one left."""
        now = time.monotonic()
        if now - self._swept.get(streams, float("-inf")) < SWEEP_EVERY_S:
            return 0
        self._swept[streams] = now
        idle_ms = int(IDLE_LEASES * self._core.options.lease_s * 1000)
        try:
            deleted = await drop_consumers(self._core, streams, group, idle_ms)
        except BusError as exc:
            log.debug("consumers of %s not swept: %s", ", ".join(streams), exc)
            return 0
        if deleted:
            log.info("deleted %d idle consumer(s) of %s holding nothing", deleted,
                     ", ".join(streams))  # fmt: skip
        return deleted

    def forget(self, streams: tuple[str, ...]) -> None:
        self._swept.pop(streams, None)

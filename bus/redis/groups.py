"""The consumer groups one Redis bus made or met, and the one report of their loss.

A Redis that comes back empty (``FLUSHALL``, a restart without persistence) leaves streams without
their consumer groups. Every reader makes its group again (inboxes on ``NOGROUP``, the spawn claim
script by itself); what tells a loss from a first use is whether this bus had met the group
before, and that memory lives here. The loss is reported once, as one line
(:meth:`ConsumerGroups.report_lost`): every reader finds it on its own, and a thousand agents
must not log a thousand lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from baton.bus.errors import redact_url
from baton.bus.redis.adapter import BusyGroup

log = logging.getLogger(__name__)

LOSS_QUIET_S = 60.0
"""After reporting that Redis lost baton's data, further findings within this long are part of
the same loss (each stream is found gone by its own reader) and are not reported again."""


class ConsumerGroups:
    """The streams whose consumer group this bus made or met (``one`` runs a command through
    the bus's core; ``url`` names the server in the report)."""

    __slots__ = ("_lost_reported_at", "_one", "_ready", "_url")

    def __init__(self, url: str, one: Callable[..., Awaitable[Any]]) -> None:
        self._url = url
        self._one = one
        self._ready: set[str] = set()
        self._lost_reported_at = float("-inf")

    def ready(self, key: str) -> bool:
        return key in self._ready

    async def ensure(self, key: str, group: str) -> None:
        """Create the stream's consumer group unless this bus made or met it already."""
        if key in self._ready:
            return
        try:
            await self._one("XGROUP", "CREATE", key, group, "0", "MKSTREAM")
        except BusyGroup:
            pass
        self._ready.add(key)

    def forget(self, key: str) -> None:
        """The group is gone (NOGROUP): the next :meth:`ensure` creates it again. If this bus
        had met it before, Redis lost it: reported (:meth:`report_lost`)."""
        if key in self._ready:
            self._ready.discard(key)
            self.report_lost([key])

    def deleted(self, keys: Sequence[str]) -> None:
        """Streams deleted on purpose: forgotten, and not reported as lost if made again."""
        self._ready.difference_update(keys)

    def made(self, looked: Sequence[str], created: Sequence[str]) -> None:
        """A script made sure ``looked`` have their groups, creating those of ``created``:
        the created ones this bus had met before were lost, and are reported."""
        lost = [key for key in created if key in self._ready]
        self._ready.update(looked)
        if lost:
            self.report_lost(lost)

    def report_lost(self, keys: Sequence[str]) -> None:
        """Redis no longer has streams and groups this bus used (a ``FLUSHALL``, or a restart
        without persistence); they were made again. One WARNING line per episode — the first
        finding — and DEBUG for more within ``LOSS_QUIET_S``: every reader finds the loss on its
        own, and a thousand agents must not log a thousand lines (nor any a traceback)."""
        now = time.monotonic()
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        if now - self._lost_reported_at < LOSS_QUIET_S:
            log.debug("Redis lost %s as well; made again", shown)
            return
        self._lost_reported_at = now
        log.warning(
            "Redis at %s came back without baton's data (FLUSHALL, or a restart without "
            "persistence): made %s again; whatever was queued there before is gone",
            redact_url(self._url),
            shown,
        )

"""Worker announcements in process: per pool, each worker's profiles and when its word lapses."""

from __future__ import annotations

from collections.abc import Collection

import anyio

from baton.bus.memory.core import MemoryCore
from baton.bus.parts.workers import Workers


class MemoryWorkers(Workers):
    """Announcements kept on the broker; lapsed ones are dropped when a pool is read."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core
        self._broker = core.broker

    async def announce(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> None:
        self._core.check_open()
        announced = self._broker.workers.setdefault(pool, {})
        if ttl_s > 0:
            announced[worker] = (frozenset(profiles), anyio.current_time() + ttl_s)
        else:
            announced.pop(worker, None)

    async def live(self, pool: str) -> dict[str, frozenset[str]]:
        self._core.check_open()
        now = anyio.current_time()
        announced = self._broker.workers.get(pool, {})
        for worker in [w for w, (_, until) in announced.items() if until <= now]:
            del announced[worker]
        return {worker: profiles for worker, (profiles, _) in announced.items()}

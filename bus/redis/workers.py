"""Worker announcements on Redis: one sorted set per pool, each member scored by when it lapses
(:file:`scripts/announce_worker.lua`, :file:`scripts/pool_workers.lua`: server time, so the
clocks of the workers' machines never matter)."""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable

from baton.bus.parts.workers import Workers
from baton.bus.redis.core import RedisCore
from baton.bus.redis.scripts import ANNOUNCE_WORKER, POOL_WORKERS

log = logging.getLogger(__name__)


class RedisWorkers(Workers):
    """Announce this process's workers and read a pool's live ones."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def announce(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> None:
        member = announcement(worker, profiles)
        ttl_ms = max(1, round(ttl_s * 1000)) if ttl_s > 0 else 0
        await self._core.one(*ANNOUNCE_WORKER.call(self._core.keys.workers(pool), member, ttl_ms))

    async def live(self, pool: str) -> dict[str, frozenset[str]]:
        members = await self._core.one(*POOL_WORKERS.call(self._core.keys.workers(pool)))
        return read_announcements(str(member) for member in members or ())


def announcement(worker: str, profiles: Collection[str]) -> str:
    """A worker's announcement that it serves a pool: its name and profiles, as JSON (the same
    text every time, so renewing it replaces its own entry)."""
    return json.dumps({"worker": worker, "profiles": sorted(profiles)}, ensure_ascii=False)


def read_announcements(members: Iterable[str]) -> dict[str, frozenset[str]]:
    """Worker → profiles, from announcements; one that does not parse (not written by baton)
    is skipped."""
    workers: dict[str, set[str]] = {}
    for member in members:
        try:
            data = json.loads(member)
            name, profiles = str(data["worker"]), [str(p) for p in data["profiles"]]
        except (ValueError, TypeError, KeyError):
            log.debug("skipping a worker announcement that does not parse: %r", member[:200])
            continue
        workers.setdefault(name, set()).update(profiles)
    return {name: frozenset(profiles) for name, profiles in workers.items()}

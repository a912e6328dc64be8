"""Worker announcements on Redis: one sorted set per pool, each member scored by when it lapses
(:file:`scripts/announce_worker.lua`, :file:`scripts/pool_workers.lua`: server time, so the
clocks of the workers' machines never matter)."""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Iterator

from baton.bus.parts.workers import Workers
from baton.bus.redis.core import RedisCore
from baton.bus.redis.scripts import ANNOUNCE_WORKER, POOL_WORKERS
from baton.bus.utf8 import printable

log = logging.getLogger(__name__)

LEASE_RULE = "worker"
"""How the announcing worker holds its spawn requests: ``worker``, one lease per worker (its member
of the tag's leases), which a claimant must find lapsed (``docs/protocol.md``, *Spawn requests
and worker pools*). An announcement without it is a worker of an earlier release, which takes
over any request idle a lease, so the live agents of this release's workers too (their requests
sit idle under a live lease): a worker that sees one says so."""


class RedisWorkers(Workers):
    """Announce this process's workers and read a pool's live ones."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core
        self._warned: set[tuple[str, str]] = set()

    async def announce(
        self, pool: str, worker: str, profiles: Collection[str], ttl_s: float
    ) -> None:
        member = announcement(worker, profiles)
        key = self._core.keys.workers(pool)
        if ttl_s <= 0:  # stopping: nothing to look at any more
            await self._core.one(*ANNOUNCE_WORKER.call(key, member, 0))
            return
        ttl_ms = max(1, round(ttl_s * 1000))
        _, members = await self._core.call(
            ANNOUNCE_WORKER.call(key, member, ttl_ms), POOL_WORKERS.call(key)
        )
        for name in earlier_release(str(m) for m in members or ()):
            if (pool, name) not in self._warned:
                self._warned.add((pool, name))
                log.warning(
                    "worker %s of pool %s runs an earlier baton release, which takes a spawn "
                    "request over once it is idle a lease: it will take over agents that live "
                    "workers of this release still run, and both will run them. Stop it, or "
                    "upgrade every worker of the pool (docs/protocol.md, Claiming)",
                    printable(name)[:100], pool,
                )  # fmt: skip

    async def live(self, pool: str) -> dict[str, frozenset[str]]:
        members = await self._core.one(*POOL_WORKERS.call(self._core.keys.workers(pool)))
        return read_announcements(str(member) for member in members or ())


def announcement(worker: str, profiles: Collection[str]) -> str:
    """A worker's announcement that it serves a pool: its name and profiles, as JSON (the same
    text every time, so renewing it replaces its own entry)."""
    data = {"worker": worker, "profiles": sorted(profiles), "lease": LEASE_RULE}
    return json.dumps(data, ensure_ascii=False)


def earlier_release(members: Iterable[str]) -> list[str]:
    """The workers whose announcement does not say it holds its requests under
    :data:`LEASE_RULE`."""
    return [name for name, _, rule in _parsed(members) if rule != LEASE_RULE]


def read_announcements(members: Iterable[str]) -> dict[str, frozenset[str]]:
    """Worker → profiles, from announcements."""
    workers: dict[str, set[str]] = {}
    for name, profiles, _ in _parsed(members):
        workers.setdefault(name, set()).update(profiles)
    return {name: frozenset(profiles) for name, profiles in workers.items()}


def _parsed(members: Iterable[str]) -> Iterator[tuple[str, list[str], object]]:
    """Each announcement's worker, profiles and lease rule; one that does not parse (not
    written by baton) is skipped."""
    for member in members:
        try:
            data = json.loads(member)
            name, profiles = str(data["worker"]), [str(p) for p in data["profiles"]]
        except (ValueError, TypeError, KeyError):
            log.debug("skipping a worker announcement that does not parse: %r", member[:200])
            continue
        yield name, profiles, data.get("lease")

"""``RedisBus``: the Redis backend's bundle of parts over one :class:`RedisCore`.

Each part is its own module of this package (``docs/bus.md``, *Where the Redis backend lives*);
this one builds them over the core they share and owns the lifecycle.
"""

from __future__ import annotations

from baton.bus.base import Bus, BusOptions
from baton.bus.lifecycle import Phase
from baton.bus.parts.dead import Quarantine
from baton.bus.redis.budget import RedisBudget
from baton.bus.redis.claims import RedisClaims
from baton.bus.redis.core import RedisCore
from baton.bus.redis.inboxes import RedisInboxes
from baton.bus.redis.letters import RedisDeadLetters
from baton.bus.redis.log import RedisEventLog
from baton.bus.redis.probe import wake_round_trip
from baton.bus.redis.records import RedisRecords
from baton.bus.redis.retention import RedisRetention
from baton.bus.redis.spawns import RedisSpawns
from baton.bus.redis.store import RedisStore
from baton.bus.redis.workers import RedisWorkers


class RedisBus(Bus):
    """Inboxes as streams with a consumer group, wake-ups over one shared pub/sub connection."""

    claims: RedisClaims
    retention: RedisRetention
    """Finished sessions' keys: their lifetime, and removing them (``baton clean``)."""

    def __init__(
        self,
        url: str,
        options: BusOptions | None = None,
        *,
        prefix: str = "baton",
        command_connections: int = 2,
        attempts: int = 6,
    ) -> None:
        super().__init__(options)
        self.url = url
        core = self._core = RedisCore(
            url,
            self.options,
            prefix=prefix,
            command_connections=command_connections,
            attempts=attempts,
        )
        self.keys = core.keys
        self.letters = RedisDeadLetters(core)
        self.log = RedisEventLog(core, self.letters)
        self.quarantine = Quarantine(self.letters, self.log)
        self.inboxes = RedisInboxes(core, self.quarantine)
        self.spawns = RedisSpawns(core)
        self.claims = RedisClaims(core, self.quarantine)
        self.workers = RedisWorkers(core)
        self.records = RedisRecords(core)
        self.budget = RedisBudget(core)
        self.retention = RedisRetention(core)
        self.store = RedisStore(core)

    async def start(self) -> None:
        """Connect and start the background tasks. Prefer ``async with``: a bus started by hand
        must be closed with ``aclose()`` from the same task that started it. A bus that failed
        to start is closed: open a new one to try again."""
        self._check_open()
        if self._core.phase is Phase.NEW:
            try:
                await self._core.__aenter__()
            except BaseException:
                self._closed = True
                raise

    async def aclose(self) -> None:
        """Close: refuse new work, release every waiter, stop the background tasks.

        Safe from any task (e.g. one reacting to a signal); the owner's ``async with`` then
        finishes the shutdown where it began.
        """
        if self._closed:
            return
        await super().aclose()
        self._core.stop()
        if not self._in_context:
            await self._finish()

    async def _finish(self) -> None:
        await self._core.aclose()

    async def ping(self) -> None:
        await self._core.one("PING")

    def fail_fast(self) -> None:
        self._core.fail_fast()

    async def probe(self, timeout_s: float) -> None:
        await wake_round_trip(self._core, timeout_s)

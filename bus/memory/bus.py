"""``MemoryBus``: the in-process bus, the embedded default, not a test fake.

It keeps the wire format — inboxes store JSON text and every read validates it again — so a
serialisation bug shows up here without Redis, and its delivery rules (consumer leases,
redelivery, dead letters) match the Redis backend's, which one contract suite per part checks.
Its parts are the modules of this package, over the state they share (:mod:`.core`, which also
says how a long-lived bus stays bounded).
"""

from __future__ import annotations

from dataclasses import replace

from baton.bus.base import Bus, BusOptions
from baton.bus.memory.budget import MemoryBudget
from baton.bus.memory.claims import MemoryClaims
from baton.bus.memory.core import DEFAULT_FINISHED_KEPT, Broker, MemoryCore
from baton.bus.memory.inboxes import MemoryInboxes
from baton.bus.memory.letters import MemoryDeadLetters
from baton.bus.memory.log import MemoryEventLog
from baton.bus.memory.records import MemoryRecords
from baton.bus.memory.retention import MemoryRetention
from baton.bus.memory.spawns import MemorySpawns
from baton.bus.memory.store import MemoryStore
from baton.bus.memory.workers import MemoryWorkers
from baton.bus.parts.dead import Quarantine

__all__ = ["DEFAULT_FINISHED_KEPT", "MemoryBus"]


class MemoryBus(Bus):
    """All of a process's agents on one in-memory bus (``memory://``).

    ``peer()`` gives another handle on the same bus with its own consumer name, the way a second
    process would connect to the same Redis; tests use it to play a consumer that dies.
    ``finished_kept`` bounds the finished sessions kept (see :mod:`baton.bus.memory.core`);
    peers share the bound of the bus they came from.
    """

    def __init__(
        self,
        options: BusOptions | None = None,
        url: str = "memory://",
        *,
        finished_kept: int = DEFAULT_FINISHED_KEPT,
        _broker: Broker | None = None,
    ) -> None:
        super().__init__(options)
        if finished_kept < 1:  # the session that just finished still writes its last records
            raise ValueError(f"finished_kept must be 1 or more, not {finished_kept}")
        self.url = url
        self._broker = _broker or Broker(self.options.event_log_cap, finished_kept)
        core = self._core = MemoryCore(self._broker, self.options, url)
        self.letters = MemoryDeadLetters(core)
        self.log = MemoryEventLog(core)
        self.quarantine = Quarantine(self.letters, self.log)
        self.inboxes = MemoryInboxes(core, self.quarantine)
        self.spawns = MemorySpawns(core)
        self.claims = MemoryClaims(core, self.quarantine)
        self.workers = MemoryWorkers(core)
        self.records = MemoryRecords(core)
        self.budget = MemoryBudget(core)
        self.retention = MemoryRetention()
        self.store = MemoryStore(core)

    def peer(self, consumer: str | None = None, *, options: BusOptions | None = None) -> MemoryBus:
        """Another handle on this bus's state, as a separate consumer: ``options`` (this bus's
        own, with a new consumer name, when None; ``consumer`` names it)."""
        if options is None:
            options = replace(self.options, consumer=consumer or BusOptions().consumer)
        return MemoryBus(options, self.url, _broker=self._broker)

    async def aclose(self) -> None:
        await super().aclose()
        self._core.close()

    async def ping(self) -> None:
        self._core.check_open()

"""Retention in process: nothing to expire. The data ends with the process, and the bound on
finished sessions (:mod:`baton.bus.memory.core`) keeps a long-lived one from growing."""

from __future__ import annotations

from baton.bus.parts.retention import NOTHING_LEFT, Leftovers, Retention, Retired


class MemoryRetention(Retention):
    """Retires nothing and reports no expiry."""

    async def retire(
        self, session: str, retention_s: float, left: Leftovers = NOTHING_LEFT
    ) -> Retired:
        return Retired()

    async def expiry(self, session: str) -> float | None:
        return None

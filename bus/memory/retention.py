"""Retention in process: nothing to expire. The data ends with the process, and the bound on
finished sessions (:mod:`baton.bus.memory.core`) keeps a long-lived one from growing."""

from __future__ import annotations

from collections.abc import Collection

from baton.bus.parts.retention import Retention, Retired


class MemoryRetention(Retention):
    """Retires nothing and reports no expiry."""

    async def retire(
        self,
        session: str,
        retention_s: float,
        *,
        agents: Collection[str] = (),
        inboxes: Collection[str] = (),
        unread: Collection[str] = (),
    ) -> Retired:
        return Retired()

    async def expiry(self, session: str) -> float | None:
        return None

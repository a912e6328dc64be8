"""A session's key-value store in process: one dict per session and table, forgotten with the
session (:meth:`baton.bus.memory.core.Broker.forget`)."""

from __future__ import annotations

from collections.abc import Mapping

from baton.bus.memory.core import MemoryCore
from baton.bus.parts.store import SessionStore, StoreTable


class MemoryStore(SessionStore):
    """Tables on the broker."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core
        self._tables = core.broker.tables

    async def put(self, session: str, table: StoreTable, values: Mapping[str, str]) -> None:
        self._core.check_open()
        self._tables.setdefault((session, table), {}).update(values)

    async def get(self, session: str, table: StoreTable, key: str) -> str | None:
        self._core.check_open()
        return self._tables.get((session, table), {}).get(key)

    async def put_new(self, session: str, table: StoreTable, key: str, value: str) -> bool:
        self._core.check_open()
        values = self._tables.setdefault((session, table), {})
        if key in values:
            return False
        values[key] = value
        return True

    async def remove(self, session: str, table: StoreTable, key: str) -> None:
        self._core.check_open()
        self._tables.get((session, table), {}).pop(key, None)

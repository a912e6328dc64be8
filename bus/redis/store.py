"""A session's key-value store on Redis: one hash per table (``baton:{S}:<table>``)."""

from __future__ import annotations

from collections.abc import Mapping

from baton.bus.parts.store import SessionStore, StoreTable
from baton.bus.redis.core import RedisCore, flat_fields


class RedisStore(SessionStore):
    """Tables written with ``HSET``; one written after its session ended gets the session's
    remaining lifetime (the TTL its event log has), so it never outlives the session."""

    def __init__(self, core: RedisCore) -> None:
        self._core = core

    async def put(self, session: str, table: StoreTable, values: Mapping[str, str]) -> None:
        if not values:
            return
        core, key = self._core, self._core.keys.table(session, table)
        _, ttl_ms = await core.call(
            ("HSET", key, *flat_fields(values)), ("PTTL", core.keys.events(session))
        )
        if int(ttl_ms) > 0:  # the session already ended and expires: its tables go with it
            await core.one("PEXPIRE", key, int(ttl_ms))

    async def get(self, session: str, table: StoreTable, key: str) -> str | None:
        value = await self._core.one("HGET", self._core.keys.table(session, table), key)
        return str(value) if value is not None else None

    async def put_new(self, session: str, table: StoreTable, key: str, value: str) -> bool:
        core, hash_key = self._core, self._core.keys.table(session, table)
        added, ttl_ms = await core.call(
            ("HSETNX", hash_key, key, value), ("PTTL", core.keys.events(session))
        )
        if int(added) and int(ttl_ms) > 0:  # as in put: never outlive the session
            await core.one("PEXPIRE", hash_key, int(ttl_ms))
        return bool(int(added))

    async def remove(self, session: str, table: StoreTable, key: str) -> None:
        await self._core.one("HDEL", self._core.keys.table(session, table), key)

"""The ``SessionStore`` contract (:class:`baton.bus.parts.store.SessionStore`), on the memory bus
and on real Redis: tables per session that every process sharing the bus reads."""

from __future__ import annotations

from tests.conftest import BusFactory


async def test_values_merge_per_session_and_are_shared(make_bus: BusFactory) -> None:
    async with make_bus() as server, make_bus() as other:
        assert await other.store.get("s1", "tokens", "d1") is None
        await server.store.put("s1", "tokens", {"d1": "read"})
        await server.store.put("s1", "tokens", {"d2": "write"})
        await server.store.put("s2", "tokens", {"d1": "write"})
        await server.store.put("s1", "tokens", {})  # nothing to write
        assert await other.store.get("s1", "tokens", "d1") == "read"
        assert await other.store.get("s1", "tokens", "d2") == "write"
        assert await other.store.get("s2", "tokens", "d1") == "write"
        assert await other.store.get("s2", "tokens", "d2") is None


async def test_each_table_is_its_own(make_bus: BusFactory) -> None:
    async with make_bus() as server, make_bus() as other:
        await server.store.put("s1", "agui", {"delivered": "7-0", "m:m1": "s1"})
        assert await other.store.get("s1", "agui", "delivered") == "7-0"
        assert await other.store.get("s1", "tokens", "delivered") is None
        await server.store.put("s1", "agui", {"delivered": "9-0"})  # a later run moves it on
        assert await other.store.get("s1", "agui", "delivered") == "9-0"
        assert await other.store.get("s1", "agui", "m:m1") == "s1"

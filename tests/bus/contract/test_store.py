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
    """The HTTP tokens and the MCP tasks of one session never read each other's keys."""
    async with make_bus() as bus:
        await bus.store.put("s1", "tokens", {"d1": "read"})
        await bus.store.put("s1", "mcp_tasks", {"d1": '{"session": "s1"}'})
        assert await bus.store.get("s1", "tokens", "d1") == "read"
        assert await bus.store.get("s1", "mcp_tasks", "d1") == '{"session": "s1"}'
        assert await bus.store.get("s1", "mcp_tasks", "d2") is None

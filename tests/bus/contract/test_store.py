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


async def test_the_agui_table_is_shared_by_every_server(make_bus: BusFactory) -> None:
    async with make_bus() as server, make_bus() as other:
        await server.store.put("s1", "agui", {"delivered": "7-0", "m:m1": "s1"})
        assert await other.store.get("s1", "agui", "delivered") == "7-0"
        assert await other.store.get("s1", "tokens", "delivered") is None
        await server.store.put("s1", "agui", {"delivered": "9-0"})  # a later run moves it on
        assert await other.store.get("s1", "agui", "delivered") == "9-0"
        assert await other.store.get("s1", "agui", "m:m1") == "s1"


async def test_a_new_value_is_put_once_and_can_be_taken_back(make_bus: BusFactory) -> None:
    """``put_new`` is the claim of a question's one answer: the first caller wins, every later
    one (another process too) is told no, until ``remove`` hands it back."""
    async with make_bus() as first, make_bus() as second:
        assert await first.store.put_new("s1", "answers", "q1", "reviewer")
        assert not await second.store.put_new("s1", "answers", "q1", "someone")
        assert await second.store.get("s1", "answers", "q1") == "reviewer"
        await second.store.remove("s1", "answers", "q1")
        assert await second.store.put_new("s1", "answers", "q1", "again")
        await first.store.remove("s1", "answers", "q-none")  # nothing to remove: no error

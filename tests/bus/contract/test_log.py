"""The ``EventLog`` contract (:class:`baton.bus.parts.log.EventLog`), on the memory bus and on
real Redis: events come back in order from any cursor, tails follow, ``emit_once`` logs a step
once however often it is redone, and the sessions are listed newest first."""

from __future__ import annotations

import anyio

from baton.bus.events import AgentExited, AgentProgress, Event, SessionStarted
from tests.conftest import BusFactory


async def test_event_log_tail_resumes_from_cursor(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        for i in range(5):
            await bus.log.emit(AgentProgress(session="s1", agent="a", content=f"step {i}"))
        logged = [item async for item in bus.log.tail("s1", follow=False)]
        assert [e.event.content for e in logged] == [f"step {i}" for i in range(5)]  # type: ignore[union-attr]
        resumed = [item async for item in bus.log.tail("s1", after=logged[2].cursor, follow=False)]
        assert resumed == logged[3:]

        send, receive = anyio.create_memory_object_stream[str](10)

        async def tail() -> None:
            async with send:
                async for item in bus.log.tail("s1", after=logged[-1].cursor):
                    await send.send(item.event.content)  # type: ignore[union-attr]

        async with receive, anyio.create_task_group() as tg:
            tg.start_soon(tail)
            for i in range(5, 8):
                await bus.log.emit(AgentProgress(session="s1", agent="a", content=f"step {i}"))
            with anyio.fail_after(10):
                assert [await receive.receive() for _ in range(3)] == ["step 5", "step 6", "step 7"]
            tg.cancel_scope.cancel()


async def test_event_log_lists_sessions(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.log.emit(SessionStarted(session="older", agent="lead", task="x"))
        await bus.log.emit(SessionStarted(session="newer", agent="lead", task="y"))
        sessions = await bus.log.sessions()
        assert sessions.index("newer") < sessions.index("older")


async def test_emit_returns_the_cursor_a_tail_hands_out(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        cursors = [
            await bus.log.emit(AgentProgress(session="s1", agent="a", content=str(i)))
            for i in range(3)
        ]
        assert [item.cursor async for item in bus.log.tail("s1", follow=False)] == cursors
        assert [item async for item in bus.log.tail("s1", after=cursors[-1], follow=False)] == []


async def test_a_session_without_a_log_has_no_events(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert [item async for item in bus.log.tail("nobody", follow=False)] == []
        assert "nobody" not in await bus.log.sessions()


async def test_emit_once_logs_a_step_once_per_mark_from_any_process(make_bus: BusFactory) -> None:
    exited: list[Event] = [
        AgentProgress(session="s1", agent="a", content="last words"),
        AgentExited(session="s1", agent="a", reason="finished"),
    ]
    async with make_bus(consumer="first") as first, make_bus(consumer="heir") as heir:
        assert await first.log.emit_once("s1", "a", exited, mark="final-1") is True
        assert await heir.log.emit_once("s1", "a", exited, mark="final-1") is False  # redone
        assert (await heir.records.agent("s1", "a"))["logged"] == "final-1"
        logged = [item.event async for item in heir.log.tail("s1", follow=False)]
        assert logged == exited  # once, in order
        assert await heir.log.emit_once("s1", "a", exited[:1], mark="final-2") is True
        assert len([item async for item in first.log.tail("s1", follow=False)]) == 3

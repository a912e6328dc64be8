"""Cancellation from outside: prompt, releases every human wait, leaves no task, and keeps the
history valid."""

from __future__ import annotations

import anyio
import pytest

from baton.engine import AgentLoop, MemoryChannel, StopReason, TurnResult, tool
from baton.engine import messages as texts
from baton.llm.script import Call, Stall, text, tool_calls
from baton.llm.types import Message
from tests.engine.helpers import Observed, engine_tasks, harness, human, tool_messages, user


async def run_into(loop: AgentLoop, history: list[Message], out: list[TurnResult]) -> None:
    out.append(await loop.run_turn(history))


async def test_cancel_mid_tool_stops_it_and_leaves_no_task() -> None:
    started = anyio.Event()
    outcome: list[str] = []

    @tool
    async def crunch(n: int) -> str:
        """Crunch for a long time."""
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            outcome.append(f"cancelled {n}")
            raise
        return "never"

    observed = Observed()
    calls = [Call("crunch", '{"n": 1}', id="c1"), Call("crunch", '{"n": 2}', id="c2")]
    results: list[TurnResult] = []
    async with harness([tool_calls(*calls), text("unused")], [crunch], observed=observed) as h:
        async with anyio.create_task_group() as group:
            group.start_soon(run_into, h.loop, user("crunch"), results)
            await started.wait()
            await anyio.wait_all_tasks_blocked()
            h.loop.cancel()
        assert engine_tasks() == []
        counts = observed.counts("chat.tool.loop")
    (result,) = results
    assert result.stop is StopReason.CANCELLED and sorted(outcome) == ["cancelled 1", "cancelled 2"]
    assert tool_messages(result.messages) == {
        "c1": texts.cancelled("crunch"),
        "c2": texts.cancelled("crunch"),
    }
    assert len(h.requests) == 1 and counts == {"cancelled": 1}
    ended = h.log.events[-1]
    assert ended.type == "round.ended" and all(r.synthetic for r in ended.results)


async def test_cancel_mid_approval_closes_the_pending_wait() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def wipe() -> str:
        """Wipe everything."""
        ran.append("wipe")
        return "wiped"

    results: list[TurnResult] = []
    script = [tool_calls(Call("wipe", "{}", id="w1")), text("unused")]
    async with MemoryChannel() as channel, human(channel, answer=None) as person:
        async with harness(script, [wipe], channel=channel) as h:
            async with anyio.create_task_group() as group:
                group.start_soon(run_into, h.loop, user("wipe"), results)
                await person.asked.wait()
                assert len(channel.pending()) == 1
                h.loop.cancel()
            assert engine_tasks() == []
            assert channel.pending() == []
            await anyio.wait_all_tasks_blocked()  # let the human see the closing notice
    (result,) = results
    assert result.stop is StopReason.CANCELLED and ran == []
    assert [(c.id, c.reason) for c in person.closed] == [(person.questions[0].id, "cancelled")]
    assert tool_messages(result.messages) == {"w1": texts.cancelled("wipe")}


async def test_cancel_mid_model_call_ends_the_turn_with_the_history_unchanged() -> None:
    results: list[TurnResult] = []
    history = user("think hard")
    async with harness([Stall()]) as h:
        async with anyio.create_task_group() as group:
            group.start_soon(run_into, h.loop, history, results)
            await anyio.wait_all_tasks_blocked()
            assert len(h.requests) == 1
            h.loop.cancel()
        assert engine_tasks() == []
    assert results[0].stop is StopReason.CANCELLED and results[0].messages == user("think hard")


async def test_a_turn_cancelled_before_it_starts_never_calls_the_model() -> None:
    async with harness([text("unused")]) as h:
        turn = h.loop.new_turn()
        h.loop.cancel()
        result = await h.loop.run_turn(user("hi"), turn=turn)
    assert result.stop is StopReason.CANCELLED and h.requests == []


async def test_cancellation_from_outside_the_loop_is_never_swallowed() -> None:
    started = anyio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    finished: list[str] = []
    history = user("go")
    async with harness([tool_calls(Call("slow", "{}", id="s1"))], [slow]) as h:
        with anyio.CancelScope() as outer:

            async def run() -> None:
                await h.loop.run_turn(history)
                finished.append("returned")  # must not happen: the outer cancel propagates

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await started.wait()
                outer.cancel()
        assert outer.cancelled_caught and finished == []
        assert engine_tasks() == []
        assert tool_messages(history) == {"s1": texts.cancelled("slow")}
        # the loop is usable again afterwards
        h.server.add(text("fine"))
        again = await h.loop.run_turn(user("again"))
    assert again.text == "fine"


async def test_the_loop_refuses_nothing_after_a_cancelled_turn() -> None:
    async with harness([text("one"), text("two")]) as h:
        h.loop.new_turn()
        h.loop.cancel()
        first = await h.loop.run_turn(user("1"))
        second = await h.loop.run_turn(user("2"))
    assert first.stop is StopReason.CANCELLED
    assert second.stop is StopReason.ANSWERED and second.text == "one"


@pytest.mark.parametrize("when", ["before", "after"])
async def test_cancel_without_a_turn_is_harmless(when: str) -> None:
    async with harness([text("ok")]) as h:
        if when == "before":
            h.loop.cancel()
        result = await h.loop.run_turn(user("hi"))
        if when == "after":
            h.loop.cancel()
    assert result.stop is StopReason.ANSWERED

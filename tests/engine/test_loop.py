"""The loop through the scripted server over real HTTP: answers, tools, faults, results."""

from __future__ import annotations

import anyio
import pytest

from baton.bus.events import (
    ErrorEvent,
    RoundEnded,
    RoundStarted,
    TextDelta,
    ToolCalled,
    ToolResulted,
)
from baton.engine import (
    LoopLimits,
    StopReason,
    TokenBudget,
    ToolResult,
    ToolRun,
    TurnInProgress,
    tool,
)
from baton.llm.errors import ModelError
from baton.llm.script import Call, ScriptItem, pieces, server_error, text, tool_calls
from baton.llm.types import Message
from tests.engine.helpers import harness, tool_messages, user


@tool
def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return str(a + b)


async def test_a_plain_answer_streams_text_and_ends_the_turn() -> None:
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    async with harness([text("Hel", "lo ", "there")], [add]) as h:
        history = user("hi")
        result = await h.loop.run_turn(history, on_text=on_text)
    assert result.stop is StopReason.ANSWERED and result.text == "Hello there"
    assert deltas == ["Hel", "lo ", "there"]
    assert [e.text for e in h.log.of(TextDelta)] == deltas
    assert h.log.types[0] == "round.started" and h.log.types[-1] == "round.ended"
    assert result.messages is history and history[-1] == {
        "role": "assistant",
        "content": "Hello there",
    }
    assert result.rounds == 0 and result.media_urls == () and result.terminal_call is None
    assert h.requests[0].tool_names == ["add"]


async def test_a_tool_round_then_an_answer() -> None:
    script = [tool_calls(Call("add", pieces('{"a": 2, "b": 3}', 4), id="c1")), text("5")]
    async with harness(script, [add]) as h:
        result = await h.loop.run_turn(user("2+3?"))
    assert result.stop is StopReason.ANSWERED and result.text == "5" and result.rounds == 1
    assert tool_messages(result.messages) == {"c1": "5"}
    sent = h.requests[1].messages
    assert sent[-1] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert sent[-2]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert [e.round for e in h.log.of(RoundStarted)] == [1, 2]
    ended = h.log.of(RoundEnded)[0]
    assert [c.call_id for c in ended.tool_calls] == ["c1"] and ended.results[0].content == "5"
    assert not ended.results[0].synthetic
    assert [e.call.name for e in h.log.of(ToolCalled)] == ["add"]


async def test_parallel_calls_run_concurrently_and_merge_in_call_order() -> None:
    started = 0
    all_started = anyio.Event()
    finished: list[int] = []
    release = {i: anyio.Event() for i in range(3)}

    @tool
    async def work(n: int) -> str:
        """Work on item n."""
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        with anyio.fail_after(5):  # a sequential run would never see all three started
            await all_started.wait()
            if n < 2:
                await release[n + 1].wait()  # finish in reverse order: 2, 1, 0
        finished.append(n)
        release[n].set()
        return f"item {n}"

    calls = [Call("work", f'{{"n": {n}}}', id=f"c{n}") for n in range(3)]
    async with harness([tool_calls(*calls), text("ok")], [work]) as h:
        result = await h.loop.run_turn(user("go"))
    assert finished == [2, 1, 0]
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        ("c0", "item 0"),
        ("c1", "item 1"),
        ("c2", "item 2"),
    ]
    assert [r.call_id for r in h.log.of(RoundEnded)[0].results] == ["c0", "c1", "c2"]


async def test_an_unknown_tool_gets_a_recovery_hint() -> None:
    script = [tool_calls(Call("subtract", '{"a": 1}', id="c1")), text("sorry")]
    async with harness(script, [add]) as h:
        result = await h.loop.run_turn(user("1-1"))
    hint = tool_messages(result.messages)["c1"]
    assert "'subtract' did not run: there is no tool by that name" in hint
    assert "Valid tools: add." in hint
    assert result.stop is StopReason.ANSWERED
    assert h.log.of(ToolResulted)[0].result.is_error


async def test_invalid_arguments_get_the_validation_error_and_the_tool_does_not_run() -> None:
    ran: list[str] = []

    @tool
    def echo(word: str, times: int = 1) -> str:
        """Echo a word."""
        ran.append(word)
        return word * times

    script = [
        tool_calls(
            Call("echo", '{"word": "hi", "times": "many"}', id="bad_type"),
            Call("echo", '{"word": "hi",', id="bad_json"),
            Call("echo", "{}", id="missing"),
        ),
        text("done"),
    ]
    async with harness(script, [echo]) as h:
        result = await h.loop.run_turn(user("echo"))
    answers = tool_messages(result.messages)
    assert ran == []
    assert "echo did not run: its arguments are invalid. times:" in answers["bad_type"]
    assert "valid integer" in answers["bad_type"]
    assert "Invalid JSON" in answers["bad_json"]
    assert "word: Field required" in answers["missing"]
    assert all("call it again once" in a for a in answers.values())


async def test_a_tool_exception_is_answered_with_the_error_text() -> None:
    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"boom: {reason}")

    script = [tool_calls(Call("explode", '{"reason": "disk full"}', id="c1")), text("it failed")]
    async with harness(script, [explode]) as h:
        result = await h.loop.run_turn(user("try"))
    answer = tool_messages(result.messages)["c1"]
    assert answer.startswith("explode failed with ValueError: boom: disk full.")
    assert result.stop is StopReason.ANSWERED


async def test_a_tool_past_its_timeout_is_stopped() -> None:
    stopped = anyio.Event()

    @tool(run=ToolRun(timeout_s=0.05))
    async def hang() -> str:
        """Never returns."""
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    async with harness([tool_calls(Call("hang", "{}", id="c1")), text("gave up")], [hang]) as h:
        result = await h.loop.run_turn(user("wait"))
    assert stopped.is_set()
    assert (
        "hang did not finish within 0.05 s and was stopped" in tool_messages(result.messages)["c1"]
    )


async def test_oversized_results_are_truncated_with_a_note() -> None:
    @tool
    def big() -> str:
        """A large result."""
        return "x" * 100

    @tool(run=ToolRun(max_result_chars=30))
    def bigger() -> str:
        """A large result with its own limit."""
        return "y" * 100

    script = [tool_calls(Call("big", "{}", id="c1"), Call("bigger", "{}", id="c2")), text("ok")]
    limits = LoopLimits(max_result_chars=10)
    async with harness(script, [big, bigger], limits=limits) as h:
        result = await h.loop.run_turn(user("go"))
    answers = tool_messages(result.messages)
    assert answers["c1"].startswith("x" * 10 + "\n\n[truncated: 90 of 100 characters cut.")
    assert answers["c2"].startswith("y" * 30 + "\n\n[truncated: 70 of 100 characters cut.")


async def test_a_terminal_call_ends_the_loop_after_it_runs() -> None:
    sent: list[str] = []

    @tool(terminal=lambda args: args["type"] == "result")
    def send_message(to: str, content: str, type: str = "message") -> str:
        """Send a message to another agent."""
        sent.append(f"{type}:{content}")
        return "sent"

    script = [
        tool_calls(Call("send_message", '{"to": "lead", "content": "working"}', id="c1")),
        tool_calls(
            Call("send_message", '{"to": "lead", "content": "42", "type": "result"}', id="c2")
        ),
        text("never requested"),
    ]
    async with harness(script, [send_message]) as h:
        result = await h.loop.run_turn(user("compute"))
    assert sent == ["message:working", "result:42"]
    assert result.stop is StopReason.TERMINAL and result.rounds == 2
    assert result.terminal_call is not None and result.terminal_call.id == "c2"
    assert len(h.requests) == 2
    assert result.messages[-1] == {"role": "tool", "tool_call_id": "c2", "content": "sent"}


async def test_media_urls_from_every_tool_of_the_turn_come_out() -> None:
    @tool
    async def draw(subject: str) -> ToolResult:
        """Draw a picture."""
        return ToolResult(f"drew {subject}", media_urls=[f"https://img.test/{subject}.png"])

    script = [
        tool_calls(Call("draw", '{"subject": "cat"}'), Call("draw", '{"subject": "dog"}')),
        tool_calls(Call("draw", '{"subject": "cat"}')),
        text("two pictures"),
    ]
    async with harness(script, [draw]) as h:
        result = await h.loop.run_turn(user("draw"))
    assert result.media_urls == ("https://img.test/cat.png", "https://img.test/dog.png")
    assert result.text == "two pictures"


async def test_a_model_error_emits_an_error_event_and_ends_the_turn_cleanly() -> None:
    script: list[ScriptItem] = [
        tool_calls(Call("add", '{"a": 1, "b": 1}', id="c1")),
        server_error(500),
    ]
    async with harness(script, [add]) as h:
        result = await h.loop.run_turn(user("1+1"))
    assert result.stop is StopReason.ERROR and isinstance(result.error, ModelError)
    errors = h.log.of(ErrorEvent)
    assert len(errors) == 1 and errors[0].detail["round"] == 2
    assert errors[0].detail["kind"] == type(result.error).__name__
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "tool"]
    assert result.text == ""


async def test_one_turn_at_a_time() -> None:
    gate = anyio.Event()

    @tool
    async def wait() -> str:
        """Wait for the gate."""
        await gate.wait()
        return "ok"

    async with harness([tool_calls(Call("wait", "{}")), text("done")], [wait]) as h:
        async with anyio.create_task_group() as group:
            group.start_soon(h.loop.run_turn, user("a"))
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(TurnInProgress):
                await h.loop.run_turn(user("b"))
            gate.set()


async def test_the_history_is_compressed_to_the_token_budget_before_the_call() -> None:
    history: list[Message] = [
        {"role": "system", "content": "SYSTEM PROMPT"},
        {"role": "user", "content": "old question"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "old", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "old", "content": "z" * 20_000},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new question"},
    ]
    budget = TokenBudget(max_tokens=2_000, reserve_tokens=200)
    async with harness([text("fits")], [add], token_budget=budget) as h:
        result = await h.loop.run_turn(history)
    sent = h.requests[0].messages
    assert sent[0] == {"role": "system", "content": "SYSTEM PROMPT"}
    assert sent[-1] == {"role": "user", "content": "new question"}
    assert sent[3]["content"].startswith("[older tool output removed")
    assert result.messages[3]["content"] == sent[3]["content"]  # the caller's history too
    assert result.text == "fits"

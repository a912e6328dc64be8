"""The hooks the lead and sub-agents build on: tool_choice, call_rewriter, spend, blocked results,
repeat keys and ToolRegistry.replace — through the real client and the scripted server."""

from __future__ import annotations

import json

import pytest

from baton.bus.events import (
    BudgetUpdated,
    ErrorEvent,
    GuardFired,
    ModelRetried,
    TextDelta,
    TextRetracted,
)
from baton.engine import (
    LoopLimits,
    StopReason,
    ToolDefinitionError,
    ToolRegistry,
    ToolResult,
    tool,
)
from baton.engine.spend import SpendLimits, SpendTotals
from baton.llm.errors import BudgetExhausted
from baton.llm.script import Call, ScriptItem, parse_failure, server_error, text, tool_calls
from baton.llm.types import ToolCall, Usage
from tests.engine.helpers import harness, tool_messages, user


@tool
def echo(content: str) -> str:
    """Echo the content back."""
    return f"echo: {content}"


class CountingSpend:
    """A Spend kept in memory: the contract the loop relies on (BusSpend keeps it on the bus)."""

    def __init__(self, limits: SpendLimits) -> None:
        self.limits = limits
        self.calls = 0
        self.tokens = 0
        self.reserved: list[str] = []

    def _totals(self) -> SpendTotals:
        return SpendTotals(calls=self.calls, tokens=self.tokens, limits=self.limits)

    async def reserve(self, agent: str) -> SpendTotals:
        limits = self.limits
        if (limits.max_model_calls is not None and self.calls >= limits.max_model_calls) or (
            limits.max_tokens is not None and self.tokens >= limits.max_tokens
        ):
            raise BudgetExhausted(f"the session's budget is spent ({self.calls} calls)")
        self.calls += 1
        self.reserved.append(agent)
        return self._totals()

    async def record(self, agent: str, usage: Usage | None) -> SpendTotals:
        if usage is not None:
            self.tokens += usage.total_tokens
        return self._totals()


async def test_tool_choice_is_sent_on_every_request_with_tools() -> None:
    script = [tool_calls(Call("echo", '{"content": "a"}')), text("done")]
    async with harness(script, [echo], tool_choice="required") as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED
    assert [r.body.get("tool_choice") for r in h.requests] == ["required", "required"]


async def test_run_turn_overrides_the_loops_tool_choice_for_that_turn_only() -> None:
    script = [text("wrapped up"), text("none asked"), text("back to the loop's")]
    async with harness(script, [echo], tool_choice="required") as h:
        await h.loop.run_turn(user("go"), tool_choice="none")
        await h.loop.run_turn(user("go"), tool_choice=None)
        await h.loop.run_turn(user("go"))
    assert [r.body.get("tool_choice") for r in h.requests] == ["none", None, "required"]
    assert "tool_choice" not in h.requests[1].body


async def test_with_tool_choice_none_a_call_written_as_text_is_an_answer() -> None:
    written = '{"name": "echo", "arguments": {"content": "a"}}'
    async with harness([text(written)], [echo], tool_choice="required") as h:
        result = await h.loop.run_turn(user("go"), tool_choice="none")
    assert result.stop is StopReason.ANSWERED and result.rounds == 0
    assert result.text == written


async def test_without_tool_choice_none_is_sent() -> None:
    async with harness([text("hi")], [echo]) as h:
        await h.loop.run_turn(user("go"))
    assert "tool_choice" not in h.requests[0].body


async def test_call_rewriter_maps_a_profile_name_to_the_real_tool_and_the_history_says_so() -> None:
    def rewrite(call: ToolCall) -> ToolCall | None:
        if call.name != "painter":
            return None
        task = json.loads(call.arguments)["task"]
        return ToolCall(call.id, "echo", json.dumps({"content": task}))

    script = [tool_calls(Call("painter", '{"task": "a fox"}', id="c1")), text("done")]
    async with harness(script, [echo], call_rewriter=rewrite) as h:
        history = user("paint")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.ANSWERED
    assert tool_messages(history) == {"c1": "echo: a fox"}
    assistant = history[2]
    assert assistant["role"] == "assistant"
    calls = assistant.get("tool_calls")
    assert calls is not None and [c["function"]["name"] for c in calls] == ["echo"]  # type: ignore[typeddict-item]


async def test_a_tool_returning_blocked_twice_in_a_row_ends_the_turn_as_blocked() -> None:
    @tool
    def send(content: str) -> ToolResult:
        """Always refused (a cap)."""
        return ToolResult(f"refused: {content}", blocked=True)

    script = [
        tool_calls(Call("send", '{"content": "one"}')),
        tool_calls(Call("send", '{"content": "two"}')),
        text("never asked"),
    ]
    async with harness(script, [send]) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.BLOCKED and result.rounds == 2
    assert len(h.requests) == 2
    assert [g.outcome for g in h.log.of(GuardFired)] == ["blocked-rounds"]


async def test_a_round_with_one_call_that_ran_resets_the_blocked_count() -> None:
    @tool
    def send(content: str) -> ToolResult:
        """Refused unless the content is "ok"."""
        return ToolResult(content, blocked=content != "ok")

    script = [
        tool_calls(Call("send", '{"content": "no1"}')),
        tool_calls(Call("send", '{"content": "ok"}'), Call("send", '{"content": "no2"}')),
        tool_calls(Call("send", '{"content": "no3"}')),
        text("answer"),
    ]
    async with harness(script, [send]) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED and result.rounds == 3


async def test_repeat_key_catches_the_same_content_sent_to_different_targets() -> None:
    @tool(repeat_key=lambda args: str(args["content"]))
    def send_message(to: str, content: str) -> str:
        """Send a message."""
        return f"sent to {to}"

    targets = ["painter", "helper", "writer", "painter-2"]
    script = [
        tool_calls(
            *(
                Call("send_message", json.dumps({"to": t, "content": f"Paint a fox{p}"}), id=t)
                for t, p in zip(targets, ["", ".", "!", "  "], strict=True)
            )
        ),
        text("done"),
    ]
    async with harness(script, [send_message]) as h:
        history = user("go")
        await h.loop.run_turn(history)
    results = tool_messages(history)
    assert [results[t].startswith("sent to") for t in targets] == [True, True, True, False]
    assert "same request" in results["painter-2"]
    assert [g.outcome for g in h.log.of(GuardFired)] == ["repeated"]


async def test_calls_differing_only_trivially_are_repeats() -> None:
    variants = ['{"content": "A fox"}', '{"content": "a  fox."}', '{"content": " A FOX "}']
    script = [tool_calls(*(Call("echo", v, id=f"c{i}") for i, v in enumerate(variants * 2)))]
    script.append(text("done"))
    async with harness(script, [echo]) as h:
        history = user("go")
        await h.loop.run_turn(history)
    results = tool_messages(history)
    ran = [key for key, value in results.items() if value.startswith("echo:")]
    assert ran == ["c0", "c1", "c2"]


async def test_spend_is_reserved_before_each_call_and_recorded_after() -> None:
    spend = CountingSpend(SpendLimits(max_model_calls=10))
    script = [tool_calls(Call("echo", '{"content": "a"}')), text("done")]
    async with harness(script, [echo], spend=spend) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED
    assert spend.reserved == ["tester", "tester"]
    updates = h.log.of(BudgetUpdated)
    assert [u.calls for u in updates] == [1, 2] and updates[-1].max_calls == 10
    assert updates[-1].tokens == spend.tokens > 0


async def test_a_spent_budget_refuses_the_call_before_the_request() -> None:
    spend = CountingSpend(SpendLimits(max_model_calls=1))
    script = [tool_calls(Call("echo", '{"content": "a"}')), text("never")]
    async with harness(script, [echo], spend=spend) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.BUDGET
    assert isinstance(result.error, BudgetExhausted)
    assert len(h.requests) == 1  # the second call was refused before it was made
    assert [g.outcome for g in h.log.of(GuardFired)] == ["budget"]
    assert h.log.of(ErrorEvent)[0].detail["kind"] == "BudgetExhausted"


async def test_each_retry_of_the_client_counts_against_the_budget() -> None:
    spend = CountingSpend(SpendLimits(max_model_calls=10))
    script: list[ScriptItem] = [server_error(), server_error(), text("done")]
    async with harness(script, [echo], spend=spend, retries=2) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.ANSWERED and result.retries == 2
    assert len(h.requests) == 3 and spend.reserved == ["tester"] * 3
    assert [u.calls for u in h.log.of(BudgetUpdated)] == [3]


async def test_a_retry_the_budget_refuses_is_never_sent_and_ends_the_turn() -> None:
    spend = CountingSpend(SpendLimits(max_model_calls=2))
    script: list[ScriptItem] = [server_error(), parse_failure("Let me ", "think"), text("never")]
    async with harness(script, [echo], spend=spend, retries=5) as h:
        result = await h.loop.run_turn(user("go"), on_text=_ignore)
        pending = h.server.script.pending
    assert result.stop is StopReason.BUDGET and isinstance(result.error, BudgetExhausted)
    assert len(h.requests) == 2 and pending == 1  # the refusal was not retried by the client
    assert result.retries == 1 and [r.attempt for r in h.log.of(ModelRetried)] == [1]
    assert [g.outcome for g in h.log.of(GuardFired)] == ["budget"]
    assert h.log.of(ErrorEvent)[0].detail["kind"] == "BudgetExhausted"
    shown = "".join(d.text for d in h.log.of(TextDelta))
    assert shown == "Let me think"
    assert [r.chars for r in h.log.of(TextRetracted)] == [len(shown)]  # taken back, once


async def _ignore(delta: str) -> None:
    del delta


async def test_registry_replace_swaps_the_schema_the_next_request_offers() -> None:
    def first(to: str) -> str:
        """Old."""
        return to

    def second(to: str, content: str) -> str:
        """New."""
        return to + content

    registry = ToolRegistry([tool(name="send")(first)])
    before = registry.schemas
    registry.replace(tool(name="send")(second))
    after = registry.schemas
    assert before != after
    assert after[0]["function"].get("description") == "New."
    with pytest.raises(ToolDefinitionError):
        registry.replace(tool(name="other")(first))


async def test_a_replaced_tool_is_offered_from_the_next_request_on() -> None:
    registry = ToolRegistry()

    def send(to: str) -> str:
        """Send to one of the agents."""
        return f"sent to {to}"

    def send_more(to: str, content: str) -> str:
        """Send to one of the agents, with content."""
        return f"sent {content} to {to}"

    @tool
    def refresh() -> str:
        """Refresh the roster."""
        registry.replace(tool(name="send")(send_more))
        return "refreshed"

    registry.add(tool(name="send")(send))
    registry.add(refresh)
    script = [tool_calls(Call("refresh")), text("done")]
    async with harness(script, registry) as h:
        await h.loop.run_turn(user("go"))
    params = [r.body["tools"][0]["function"]["parameters"]["properties"] for r in h.requests]
    assert [sorted(p) for p in params] == [["to"], ["content", "to"]]


async def test_rounds_the_repeat_guard_refuses_entirely_end_the_turn_as_blocked() -> None:
    same = [Call("echo", '{"content": "again"}', id=f"c{n}") for n in range(3)]
    script = [*(tool_calls(call) for call in same), text("never asked")]
    async with harness(script, [echo], limits=LoopLimits(max_repeats=1)) as h:
        history = user("go")
        result = await h.loop.run_turn(history)
    assert result.stop is StopReason.BLOCKED and result.rounds == 3
    assert [g.outcome for g in h.log.of(GuardFired)] == ["repeated", "repeated", "blocked-rounds"]
    results = tool_messages(history)
    assert results["c0"] == "echo: again" and "did not run" in results["c2"]


async def test_wrap_up_rounds_are_not_blocked_rounds_the_hard_limit_still_ends_the_turn() -> None:
    script = [tool_calls(Call("echo", json.dumps({"content": str(n)}))) for n in range(5)]
    limits = LoopLimits(soft_max_rounds=1, hard_max_rounds=3)
    async with harness(script, [echo], limits=limits) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.stop is StopReason.HARD_STOP and result.rounds == 4
    assert "blocked-rounds" not in [g.outcome for g in h.log.of(GuardFired)]


async def test_a_plain_answer_reports_its_finish_reason_and_no_retries() -> None:
    async with harness([text("hi")], [echo]) as h:
        result = await h.loop.run_turn(user("go"))
    assert result.finish_reason == "stop" and result.retries == 0

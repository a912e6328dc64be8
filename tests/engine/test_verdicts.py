"""One test per row of the verdict table (DESIGN §3), driven through the scripted server."""

from __future__ import annotations

import json
from typing import Any, Literal

from baton.bus.events import Event, GuardFired, ToolCalled
from baton.engine import AgentLoop, LoopLimits, MemoryChannel, StopReason, tool
from baton.engine import messages as texts
from baton.llm.script import Call, ScriptItem, text, tool_calls
from tests.engine.helpers import Observed, harness, human, tool_messages, user

runs: list[int] = []


@tool
def step(n: int) -> str:
    """Do step n."""
    runs.append(n)
    return f"step {n} done"


def rounds_so_far(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def keep_calling(answer_after: int | None = None) -> Any:
    """A model that calls ``step`` with new arguments each round (never a repeat)."""

    def respond(body: dict[str, Any]) -> ScriptItem:
        n = rounds_so_far(body) + 1
        if answer_after is not None and n > answer_after:
            return text("final answer")
        return tool_calls(Call("step", f'{{"n": {n}}}', id=f"r{n}"))

    return respond


async def test_continue_runs_every_round_up_to_the_soft_limit() -> None:
    runs.clear()
    observed = Observed()
    async with harness(responder=keep_calling(16), tools=[step], observed=observed) as h:
        result = await h.loop.run_turn(user("work"))
        counts = observed.counts("chat.tool.loop")
    assert result.stop is StopReason.ANSWERED and result.rounds == 16
    assert runs == list(range(1, 17))
    assert h.log.of(GuardFired) == [] and counts == {}


async def test_wrap_up_past_the_soft_limit_answers_without_running() -> None:
    runs.clear()
    observed = Observed()
    async with harness(responder=keep_calling(17), tools=[step], observed=observed) as h:
        result = await h.loop.run_turn(user("work"))
        counts = observed.counts("chat.tool.loop")
    assert result.stop is StopReason.ANSWERED and result.text == "final answer"
    assert runs == list(range(1, 17))  # round 17 ran nothing
    assert tool_messages(result.messages)["r17"] == texts.wrap_up("step", 16)
    assert "answer the user now" in texts.wrap_up("step", 16)
    assert [g.outcome for g in h.log.of(GuardFired)] == ["wrap-up"]
    assert counts == {"wrap-up": 1}


async def test_hard_stop_past_the_hard_limit_ends_the_loop() -> None:
    runs.clear()
    observed = Observed()
    async with harness(responder=keep_calling(), tools=[step], observed=observed) as h:
        result = await h.loop.run_turn(user("work forever"))
        counts = observed.counts("chat.tool.loop")
    assert result.stop is StopReason.HARD_STOP and result.rounds == 19
    assert len(h.requests) == 19 and runs == list(range(1, 17))
    answers = tool_messages(result.messages)
    assert answers["r17"] == texts.wrap_up("step", 16)
    assert answers["r18"] == texts.wrap_up("step", 17)
    assert answers["r19"] == texts.hard_stop("step", 18)
    assert counts == {"wrap-up": 2, "hard-stop": 1}


async def test_cancelled_answers_every_call_without_running_and_ends_the_loop() -> None:
    runs.clear()
    observed = Observed()
    loop_ref: list[AgentLoop] = []

    async def cancel_on_first_call(event: Event) -> None:
        if isinstance(event, ToolCalled):
            loop_ref[0].cancel()  # the user's stream went away as the model asked for tools

    script = [tool_calls(Call("step", '{"n": 1}', id="a"), Call("step", '{"n": 2}', id="b"))]
    async with harness(script, [step], observed=observed) as h:
        loop_ref.append(h.loop)
        h.loop.events = cancel_on_first_call
        result = await h.loop.run_turn(user("work"))
        counts = observed.counts("chat.tool.loop")
    assert result.stop is StopReason.CANCELLED and runs == []
    answers = tool_messages(result.messages)
    assert answers == {"a": texts.cancelled("step"), "b": texts.cancelled("step")}
    assert len(h.requests) == 1
    assert counts == {"cancelled": 1}


async def test_a_spent_round_never_opens_a_dialog() -> None:
    @tool(needs_approval=True)
    def deploy() -> str:
        """Deploy."""
        return "deployed"

    limits = LoopLimits(soft_max_rounds=0, hard_max_rounds=1)
    script = [tool_calls(Call("deploy", "{}", id="d1")), text("ok, not deploying")]
    async with MemoryChannel() as channel, human(channel) as person:
        async with harness(script, [deploy], limits=limits, channel=channel) as h:
            result = await h.loop.run_turn(user("deploy"))
    assert person.questions == []
    assert tool_messages(result.messages)["d1"] == texts.wrap_up("deploy", 0)
    assert result.stop is StopReason.ANSWERED


sent: list[str] = []


@tool(terminal=lambda args: args["type"] == "result")
def send_message(to: str, content: str, type: Literal["message", "result"] = "message") -> str:
    """Send a message; type "result" ends your work."""
    sent.append(f"{type}:{content}")
    return f"sent to {to}"


def result_call(call_id: str = "res") -> Call:
    args = {"to": "lead", "content": "the fox", "type": "result"}
    return Call("send_message", json.dumps(args), id=call_id)


async def test_past_the_soft_limit_a_sub_agent_still_sends_its_result() -> None:
    runs.clear()
    sent.clear()
    limits = LoopLimits(soft_max_rounds=1, hard_max_rounds=3)
    script = [
        tool_calls(Call("step", '{"n": 1}', id="r1")),
        tool_calls(Call("step", '{"n": 2}', id="r2")),
        tool_calls(result_call()),
        text("never asked"),
    ]
    tools = [step, send_message]
    async with harness(script, tools, limits=limits, tool_choice="required") as h:
        result = await h.loop.run_turn(user("paint"))
    assert result.stop is StopReason.TERMINAL and result.rounds == 3
    assert result.terminal_call is not None and result.terminal_call.id == "res"
    assert runs == [1] and sent == ["result:the fox"]
    wrap_up = tool_messages(result.messages)["r2"]
    assert wrap_up == texts.wrap_up("step", 1, ("send_message",))
    assert "send your result now with send_message" in wrap_up
    # a terminal call still runs, so the requests may keep asking for one
    assert [r.body.get("tool_choice") for r in h.requests] == ["required"] * 3


async def test_in_a_wrap_up_round_the_terminal_call_runs_and_the_others_do_not() -> None:
    runs.clear()
    sent.clear()
    limits = LoopLimits(soft_max_rounds=0, hard_max_rounds=2)
    note = Call("send_message", '{"to": "lead", "content": "busy"}', id="note")
    script = [tool_calls(Call("step", '{"n": 1}', id="s1"), note, result_call())]
    async with harness(script, [step, send_message], limits=limits) as h:
        result = await h.loop.run_turn(user("paint"))
    assert result.stop is StopReason.TERMINAL and result.rounds == 1
    assert runs == [] and sent == ["result:the fox"]
    answers = tool_messages(result.messages)
    assert answers["res"] == "sent to lead"
    assert answers["s1"] == texts.wrap_up("step", 0, ("send_message",))
    assert answers["note"] == texts.wrap_up("send_message", 0, ("send_message",))
    assert [g.outcome for g in h.log.of(GuardFired)] == ["wrap-up", "wrap-up"]


async def test_past_the_soft_limit_an_agent_without_a_terminal_tool_is_not_asked_required() -> None:
    runs.clear()
    limits = LoopLimits(soft_max_rounds=1, hard_max_rounds=3)
    script = [
        tool_calls(Call("step", '{"n": 1}', id="r1")),
        tool_calls(Call("step", '{"n": 2}', id="r2")),
        text("final answer"),
    ]
    async with harness(script, [step], limits=limits, tool_choice="required") as h:
        result = await h.loop.run_turn(user("work"))
    assert result.stop is StopReason.ANSWERED and result.text == "final answer"
    assert runs == [1]
    assert tool_messages(result.messages)["r2"] == texts.wrap_up("step", 1)
    assert [r.body.get("tool_choice") for r in h.requests] == ["required", "auto", "auto"]

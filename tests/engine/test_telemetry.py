"""Spans follow the GenAI semantic conventions; telemetry is a no-op without a provider."""

from __future__ import annotations

from baton.engine import Telemetry, tool
from baton.llm.script import Call, text, tool_calls
from tests.engine.helpers import Observed, harness, user


@tool
def fail() -> str:
    """Always fails."""
    raise RuntimeError("nope")


@tool
def ok() -> str:
    """Works."""
    return "fine"


async def test_invoke_agent_and_execute_tool_spans() -> None:
    observed = Observed()
    script = [tool_calls(Call("ok", "{}", id="a"), Call("fail", "{}", id="b")), text("done")]
    async with harness(script, [ok, fail], observed=observed) as h:
        await h.loop.run_turn(user("go"))
        spans = {span.name: span for span in observed.spans()}
    agent = spans["invoke_agent tester"]
    assert agent.attributes is not None
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "tester"
    assert agent.attributes["gen_ai.request.model"] == "scripted"
    assert agent.attributes["baton.stop_reason"] == "answered"
    good, bad = spans["execute_tool ok"], spans["execute_tool fail"]
    assert good.attributes is not None and bad.attributes is not None
    assert good.attributes["gen_ai.tool.call.id"] == "a"
    assert good.attributes["gen_ai.operation.name"] == "execute_tool"
    assert bad.attributes["error.type"] == "RuntimeError"
    assert good.parent is not None and good.parent.span_id == agent.context.span_id


async def test_telemetry_without_a_configured_sdk_is_silent() -> None:
    telemetry = Telemetry()  # the API's global no-op providers
    telemetry.loop_outcome("repeated")
    telemetry.hitl_decision("approved")
    with telemetry.tool_span("t", "c") as span:
        span.fail("X")
        span.set("k", 1)
    async with harness([text("hi")], telemetry=telemetry) as h:
        result = await h.loop.run_turn(user("hi"))
    assert result.text == "hi"

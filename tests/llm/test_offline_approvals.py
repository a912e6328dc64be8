"""The offline model and the approval demo: the lead sends the ``publisher`` only a task that asks
to publish (never a round-robin one, which would stop on an approval nobody meant to be asked),
and a sub-agent whose call was declined says so instead of claiming the work done."""

from __future__ import annotations

import json
from typing import Any

from baton.engine.messages import approval_denied_by_policy
from baton.llm.offline import SUBAGENT_MARKER, offline_model
from baton.llm.types import ToolSchema
from tests.llm.test_offline import assistant_turn, send_message_tool, tool_results

AGENTS = ["painter", "writer", "helper", "publisher"]
LEAD_TOOLS = [send_message_tool(AGENTS, ["task", "message", "shutdown"])]
PUBLISH: ToolSchema = {
    "type": "function",
    "function": {
        "name": "publish",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
}
SUB_TOOLS = [PUBLISH, send_message_tool(["lead"], ["progress", "result"])]


async def _targets(task: str) -> list[str]:
    async with offline_model() as model:
        reply = await model.complete([{"role": "user", "content": task}], LEAD_TOOLS)
    return [json.loads(call.arguments)["to"] for call in reply.tool_calls]


async def test_the_publisher_gets_a_task_that_asks_to_publish_and_no_other() -> None:
    assert await _targets("publish a haiku") == ["publisher"]
    dealt = await _targets("one, two, three, four, five, six, seven, eight")
    assert "publisher" not in dealt and set(dealt) == {"painter", "writer", "helper"}


async def test_a_declined_call_is_reported_as_not_done() -> None:
    messages: list[Any] = [
        {"role": "system", "content": f"{SUBAGENT_MARKER} You publish."},
        {"role": "user", "content": "[task from lead] publish a haiku"},
    ]
    async with offline_model() as model:
        first = await model.complete(messages, SUB_TOOLS)
        assert [c.name for c in first.tool_calls] == ["publish"]
        declined = approval_denied_by_policy("publish")
        messages += [assistant_turn(first), *tool_results(first, declined)]
        second = await model.complete(messages, SUB_TOOLS)
    report = json.loads(second.tool_calls[0].arguments)
    assert report["type"] == "result"
    assert report["content"].startswith("Not done: publish a haiku. publish did not run: ")
    assert "Done:" not in report["content"]

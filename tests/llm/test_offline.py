"""The offline model's scripts, end to end through OpenAIChatModel and the real openai client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from baton.lead.prompt import news_first
from baton.llm.client import OpenAIChatModel
from baton.llm.offline import (
    DEFAULT_AGENT,
    LEAD_MARKER,
    OFFLINE_LABEL,
    OFFLINE_MODEL_NAME,
    SUBAGENT_MARKER,
    is_offline,
    offline_model,
    offline_server,
    role_of,
)
from baton.llm.types import ModelReply, ToolSchema
from tests.llm.helpers import Mount, TextLog, connected


def send_message_tool(agents: list[str] | None, types: list[str] | None) -> ToolSchema:
    to: dict[str, Any] = {"type": "string"}
    if agents is not None:
        to["enum"] = agents
    kind: dict[str, Any] = {"type": "string"}
    if types is not None:
        kind["enum"] = types
    return {
        "type": "function",
        "function": {
            "name": "send_message",
            "parameters": {
                "type": "object",
                "properties": {"to": to, "content": {"type": "string"}, "type": kind},
                "required": ["to", "content", "type"],
            },
        },
    }


IMAGE_TOOL: ToolSchema = {
    "type": "function",
    "function": {
        "name": "generate_image",
        "parameters": {
            "type": "object",
            "properties": {"prompt": {"type": "string"}},
            "required": ["prompt"],
        },
    },
}
LEAD_TOOLS = [send_message_tool(["painter", "writer"], ["task", "message", "shutdown"])]
SUB_TOOLS = [IMAGE_TOOL, send_message_tool(["lead"], ["progress", "result"])]


def assistant_turn(reply: ModelReply) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ],
    }


def tool_results(reply: ModelReply, content: str) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": c.id, "content": content} for c in reply.tool_calls]


async def test_offline_model_is_labelled() -> None:
    async with offline_model() as model:
        assert isinstance(model, OpenAIChatModel)
        assert model.model == OFFLINE_MODEL_NAME == "baton-offline"
        assert is_offline(model.model)
    assert "offline" in OFFLINE_LABEL


async def test_lead_delegates_waits_and_summarises() -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are the lead. Agents: painter, writer."},
        {"role": "user", "content": "paint a red fox and write a haiku about it; design a logo"},
    ]
    async with offline_model() as model:
        first = await model.complete(messages, LEAD_TOOLS)
        sent = [json.loads(c.arguments) for c in first.tool_calls]
        assert sent == [
            {"to": "painter", "content": "paint a red fox", "type": "task"},
            {"to": "writer", "content": "write a haiku about it", "type": "task"},
            {"to": "painter", "content": "design a logo", "type": "task"},
        ]
        assert first.text == "" and first.finish_reason == "tool_calls"
        assert len({c.id for c in first.tool_calls}) == 3

        messages += [assistant_turn(first), *tool_results(first, "delivered")]
        log = TextLog()
        waiting = await model.complete(messages, LEAD_TOOLS, on_text=log)
        assert waiting.tool_calls == ()
        assert waiting.text == "Delegated 3 tasks (painter, writer); waiting for results."
        assert len(log.deltas) > 1

        messages += [
            {"role": "assistant", "content": waiting.text},
            {
                "role": "user",
                "content": "[result from painter] Painted the fox.\n"
                "media: https://cdn.test/fox.png data:image/png;base64,iVBORw0KGgo=\n\n"
                "[result from writer] Red fox in the snow\nmedia: https://cdn.test/haiku.txt",
            },
        ]
        final = await model.complete(messages, LEAD_TOOLS)
    assert final.tool_calls == ()
    for url in (
        "https://cdn.test/fox.png",
        "data:image/png;base64,iVBORw0KGgo=",
        "https://cdn.test/haiku.txt",
    ):
        assert f"- {url}" in final.text
    assert "painter: Painted the fox." in final.text
    assert "Still waiting" not in final.text


async def test_a_send_held_back_for_unread_results_is_made_again_after_reading_them() -> None:
    """A follow-up's send met its first painter's result, unread: the runtime held it back
    ("send this then if it is still needed"). The heron is still needed: it is sent again, not
    answered with the fox alone (a follow-up's work was dropped on a loaded machine)."""
    messages: list[Any] = [
        {"role": "system", "content": "You are the lead. Agents: painter, writer."},
        {"role": "user", "content": "paint a fox"},
    ]
    async with offline_model() as model:
        first = await model.complete(messages, LEAD_TOOLS)
        messages += [assistant_turn(first), *tool_results(first, "Started painter, a new ...")]
        messages += [{"role": "user", "content": "[task from user] also paint a heron"}]
        follow_up = await model.complete(messages, LEAD_TOOLS)
        heron = {"to": "painter", "content": "also paint a heron", "type": "task"}
        assert [json.loads(c.arguments) for c in follow_up.tool_calls] == [heron]
        messages += [assistant_turn(follow_up), *tool_results(follow_up, news_first(["painter"]))]
        messages += [{"role": "user", "content": "[result from painter] Painted the fox."}]
        again = await model.complete(messages, LEAD_TOOLS)
        assert [json.loads(c.arguments) for c in again.tool_calls] == [heron]
        messages += [assistant_turn(again), *tool_results(again, "Started painter-2, a new ...")]
        waiting = await model.complete(messages, LEAD_TOOLS)
    assert waiting.tool_calls == () and "painter-2" in waiting.text


async def test_lead_reports_outstanding_agents_and_defaults_its_agent(mount: Mount) -> None:
    server = offline_server(record=True)
    tools = [send_message_tool(None, ["task", "message", "shutdown"])]
    messages: list[Any] = [{"role": "user", "content": "one\ntwo"}]
    async with connected(server, mount, model=OFFLINE_MODEL_NAME) as model:
        first = await model.complete(messages, tools)
        assert [json.loads(c.arguments)["to"] for c in first.tool_calls] == [DEFAULT_AGENT] * 2
        messages += [
            assistant_turn(first),
            *tool_results(first, "ok"),
            {"role": "user", "content": "[progress from worker] halfway"},
        ]
        progress = await model.complete(messages, tools)
        assert progress.text.startswith("Delegated 2 tasks")
        messages.append({"role": "user", "content": "[result from other] done, no pictures"})
        partial = await model.complete(messages, tools)
    assert "Still waiting for: worker." in partial.text
    assert "No media was produced." in partial.text
    assert server.requests[0].body["model"] == OFFLINE_MODEL_NAME


async def test_subagent_calls_its_tools_then_reports_to_lead() -> None:
    messages: list[Any] = [
        {"role": "system", "content": f"{SUBAGENT_MARKER} You paint."},
        {"role": "user", "content": "[task from lead] paint a red fox"},
    ]
    async with offline_model() as model:
        first = await model.complete(messages, SUB_TOOLS)
        assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
            ("generate_image", {"prompt": "paint a red fox"})
        ]
        messages += [assistant_turn(first), *tool_results(first, "saved to https://img.test/1.png")]
        second = await model.complete(messages, SUB_TOOLS)
        assert [c.name for c in second.tool_calls] == ["send_message"]
        report = json.loads(second.tool_calls[0].arguments)
        assert report["to"] == "lead" and report["type"] == "result"
        assert "https://img.test/1.png" in report["content"]
        assert "paint a red fox" in report["content"]
        messages += [assistant_turn(second), *tool_results(second, "delivered")]
        third = await model.complete(messages, SUB_TOOLS)
    assert third.tool_calls == () and third.text.startswith("Reported the result")


async def test_subagent_without_tools_answers_with_text() -> None:
    messages: list[Any] = [{"role": "user", "content": "[task from lead] think about foxes"}]
    async with offline_model() as model:
        reply = await model.complete(messages)
    assert reply.tool_calls == () and reply.text == "Done: think about foxes."


@pytest.mark.parametrize(
    ("task", "written"),
    [
        (
            "write a haiku",
            "no key, no network / a scripted model answers / canned words, gently sent",
        ),
        ("draft a note to the team", "Wrote a draft (canned, offline model): draft a note"),
        ("publish a haiku", None),  # the publisher's task, not a writing one
    ],
)
async def test_a_writing_task_gets_a_canned_text(task: str, written: str | None) -> None:
    messages: list[Any] = [{"role": "user", "content": f"[task from lead] {task}"}]
    async with offline_model() as model:
        reply = await model.complete(messages)
    if written is None:
        assert reply.text == f"Done: {task}."
    else:
        assert written in reply.text and "Done:" not in reply.text
        assert "\n" not in reply.text  # the lead's summary quotes a result's first line


async def test_one_delegated_task_is_said_in_the_singular() -> None:
    messages: list[Any] = [{"role": "user", "content": "paint a fox"}]
    async with offline_model() as model:
        first = await model.complete(messages, LEAD_TOOLS)
        messages += [assistant_turn(first), *tool_results(first, "delivered")]
        waiting = await model.complete(messages, LEAD_TOOLS)
    assert waiting.text == "Delegated 1 task (painter); waiting for results."


@pytest.mark.parametrize(
    ("system", "tools", "expected"),
    [
        (LEAD_MARKER, [], "lead"),
        (SUBAGENT_MARKER, LEAD_TOOLS, "subagent"),
        ("", LEAD_TOOLS, "lead"),
        ("", [send_message_tool(None, ["progress", "result"])], "subagent"),
        ("", [send_message_tool(["lead"], None)], "subagent"),
        ("", [send_message_tool(["a", "b"], None)], "lead"),
        ("", [IMAGE_TOOL], "subagent"),
    ],
)
def test_role_rule(system: str, tools: list[Any], expected: str) -> None:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "x"}]
    assert role_of(messages, tools) == expected

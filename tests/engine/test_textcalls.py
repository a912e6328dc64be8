"""Reading tool calls that arrive as text, in the shapes small models write them."""

from __future__ import annotations

import json

import pytest

from baton.engine.textcalls import parse_text_calls
from baton.llm.types import ToolCall

OFFERED = {"send_message", "search"}


def offered(call: ToolCall) -> ToolCall | None:
    return call if call.name in OFFERED else None


def read(text: str) -> list[tuple[str, dict[str, object]]]:
    found = parse_text_calls(text, offered)
    assert found is not None, text
    return [(call.name, json.loads(call.arguments)) for call in found.calls]


ARGS = {"to": "painter", "content": "a fox"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"name": "send_message", "arguments": ARGS}),
        json.dumps({"name": "send_message", "parameters": ARGS}),
        json.dumps({"name": "send_message", "args": ARGS}),
        json.dumps({"name": "send_message", "arguments": json.dumps(ARGS)}),
        json.dumps({"function": {"name": "send_message", "arguments": json.dumps(ARGS)}}),
        json.dumps({"type": "function", "function": {"name": "send_message", "arguments": ARGS}}),
        json.dumps({"name": "send_message", **ARGS}),
        "```json\n" + json.dumps({"name": "send_message", "arguments": ARGS}) + "\n```",
        "```\n" + json.dumps({"name": "send_message", "arguments": ARGS}, indent=2) + "\n```",
        "<tool_call>\n"
        + json.dumps({"name": "send_message", "arguments": ARGS})
        + "\n</tool_call>",
        json.dumps({"tool_calls": [{"name": "send_message", "arguments": ARGS}]}),
    ],
)
def test_one_call_in_any_common_shape(text: str) -> None:
    assert read(text) == [("send_message", ARGS)]


def test_several_calls_in_an_array_or_one_per_line() -> None:
    first = {"name": "search", "arguments": {"q": "fox"}}
    second = {"name": "search", "arguments": {"q": "heron"}}
    expected = [("search", {"q": "fox"}), ("search", {"q": "heron"})]
    assert read(json.dumps([first, second])) == expected
    assert read(json.dumps(first) + "\n" + json.dumps(second)) == expected


def test_the_rest_keeps_the_prose_and_drops_fences_and_tags() -> None:
    call = json.dumps({"name": "search", "arguments": {"q": "fox"}})
    found = parse_text_calls(f"Let me look.\n```json\n{call}\n```\n", offered)
    assert found is not None and found.rest == "Let me look."
    found = parse_text_calls(f"<tool_call>{call}</tool_call>", offered)
    assert found is not None and found.rest == ""


def test_each_call_gets_its_own_synthetic_id() -> None:
    call = json.dumps({"name": "search", "arguments": {"q": "fox"}})
    found = parse_text_calls(f"{call}\n{call}", offered)
    assert found is not None
    ids = [c.id for c in found.calls]
    assert len(set(ids)) == 2 and all(i.startswith("text_call_") for i in ids)


@pytest.mark.parametrize(
    "text",
    [
        "Here is the picture of the fox you asked for.",
        json.dumps({"name": "painter", "arguments": {"task": "a fox"}}),  # not offered
        json.dumps({"city": "Paris", "temperature": 18}),  # JSON, but no call
        json.dumps([{"name": "search", "arguments": {"q": "x"}}, {"name": "nope"}]),  # not all
        json.dumps({"name": "search", "arguments": "not json"}),
        json.dumps({"name": "search", "arguments": [1, 2]}),
        "```python\ndef f(x):\n    return {x: 1}\n```",
        '{"name": "search", "arguments": {"q": "cut of',  # cut mid-call
    ],
)
def test_text_without_an_acceptable_call_is_left_alone(text: str) -> None:
    assert parse_text_calls(text, offered) is None


def test_the_resolver_decides_and_may_rewrite() -> None:
    def profiles(call: ToolCall) -> ToolCall | None:
        if call.name == "painter":
            task = json.loads(call.arguments)["task"]
            return ToolCall(call.id, "send_message", json.dumps({"to": "painter", "content": task}))
        return None

    found = parse_text_calls(json.dumps({"name": "painter", "task": "a fox"}), profiles)
    assert found is not None
    (call,) = found.calls
    assert call.name == "send_message"
    assert json.loads(call.arguments) == {"to": "painter", "content": "a fox"}

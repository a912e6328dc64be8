"""Tools: schemas derived by pydantic, validation before the call, sync/async execution."""

from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from baton.engine import Tool, ToolDefinitionError, ToolRegistry, ToolResult, ToolRun, tool
from baton.engine.tools import as_result, parse_docstring


def send_message(
    to: str,
    content: str,
    type: Literal["message", "result"] = "message",
    media_urls: list[str] | None = None,
) -> str:
    """Send a message to another agent.

    Args:
        to: the recipient's name
        content: what to say,
            possibly long
        type: "result" ends your work
        media_urls: URLs of media to attach
    Returns:
        a receipt
    """
    return f"sent to {to}"


def test_schema_comes_from_signature_and_docstring() -> None:
    made = Tool(send_message)
    function = made.schema["function"]
    assert made.schema["type"] == "function"
    assert function["name"] == "send_message"
    assert function.get("description") == "Send a message to another agent."
    params = function.get("parameters", {})
    assert params["required"] == ["to", "content"]
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["to"] == {"type": "string", "description": "the recipient's name"}
    assert props["content"]["description"] == "what to say, possibly long"
    assert props["type"]["enum"] == ["message", "result"]
    assert "title" not in params and "title" not in props["to"]
    assert params["additionalProperties"] is False


class Point(BaseModel):
    x: int
    y: int


def test_annotated_field_descriptions_and_nested_models() -> None:
    def plot(points: list[Point], label: Annotated[str, Field(description="the caption")]) -> str:
        """Plot points."""
        return label

    made = Tool(plot)
    params: Any = made.schema["function"].get("parameters", {})
    assert params["properties"]["label"]["description"] == "the caption"
    assert "$defs" in params
    args = made.parse('{"points": [{"x": 1, "y": 2}], "label": "L"}')
    assert args["points"] == [Point(x=1, y=2)]


def test_arguments_are_validated_before_the_call() -> None:
    made = Tool(send_message)
    with pytest.raises(ValidationError):
        made.parse('{"to": "a"}')  # content missing
    with pytest.raises(ValidationError):
        made.parse('{"to": "a", "content": "b", "type": "other"}')
    with pytest.raises(ValidationError):
        made.parse('{"to": "a", "content": "b", "extra": 1}')
    with pytest.raises(ValidationError):
        made.parse("{not json")
    assert made.parse('{"to": "a", "content": "b"}') == {
        "to": "a",
        "content": "b",
        "type": "message",
        "media_urls": None,
    }


def test_empty_arguments_mean_no_arguments() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    assert Tool(ping).parse("") == {}


def test_terminal_and_approval_may_depend_on_the_arguments() -> None:
    made = tool(
        terminal=lambda args: args["type"] == "result",
        needs_approval=lambda args: args["to"] == "boss",
    )(send_message)
    result = made.parse('{"to": "lead", "content": "x", "type": "result"}')
    message = made.parse('{"to": "boss", "content": "x"}')
    assert made.is_terminal(result) and not made.is_terminal(message)
    assert made.needs_approval(message) and not made.needs_approval(result)
    assert Tool(send_message, terminal=True).is_terminal(message)


def test_media_declares_a_tool_that_makes_media() -> None:
    def paint(subject: str) -> str:
        """Paint a picture."""
        return subject

    assert tool(run=ToolRun(media=True))(paint).run.media is True
    assert Tool(paint, run=ToolRun(media=True)).run.media is True
    assert tool(paint).run.media is False and Tool(paint).run.media is False


async def test_sync_tools_run_in_a_worker_thread() -> None:
    seen: list[int] = []

    def where() -> str:
        """Report the thread."""
        seen.append(threading.get_ident())
        return "ok"

    out = await Tool(where).invoke({})
    assert out == ToolResult("ok")
    assert seen and seen[0] != threading.get_ident()


async def test_async_tools_are_awaited_and_results_normalised() -> None:
    async def image(prompt: str) -> ToolResult:
        """Make an image."""
        return ToolResult(f"made {prompt}", media_urls=["https://img.example/1.png"])

    async def data(n: int) -> dict[str, int]:
        """Return data."""
        return {"n": n}

    made = await Tool(image).invoke({"prompt": "cat"})
    assert made.content == "made cat" and made.media_urls == ("https://img.example/1.png",)
    assert (await Tool(data).invoke({"n": 2})).content == '{"n":2}'
    assert as_result(None).content == "done"


def test_definition_errors_say_what_is_wrong() -> None:
    def untyped(x) -> str:  # type: ignore[no-untyped-def]
        return str(x)

    def variadic(*args: int) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="'x' has no type hint"):
        Tool(untyped)
    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        Tool(variadic)
    with pytest.raises(ToolDefinitionError, match="names are"):
        Tool(send_message, name="bad name!")
    registry = ToolRegistry([send_message])
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.add(send_message)


def test_registry_caches_schemas_until_a_tool_is_added() -> None:
    registry = ToolRegistry()

    @registry.register(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return path

    first = registry.schemas
    assert registry.schemas is first
    assert registry.names == ("delete",) and "delete" in registry and len(registry) == 1
    assert isinstance(delete, Tool) and delete.needs_approval({"path": "x"})
    registry.add(send_message)
    assert registry.schemas is not first and len(registry.schemas) == 2


def test_docstring_parser_keeps_summary_and_params_apart() -> None:
    summary, params = parse_docstring(
        """Do a thing.

        More detail.

        Args:
            a (int): first
            b: second,
                continued
        Raises:
            ValueError: never
        """
    )
    assert summary == "Do a thing.\n\nMore detail."
    assert params == {"a": "first", "b": "second, continued"}
    assert parse_docstring(None) == ("", {})

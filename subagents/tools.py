"""The built-in tool catalogue of sub-agents: how they report, and demo tools for the offline model
(``publish`` is the one that needs a person's approval).

Every tool is built once and shared by all agents; what differs per agent comes from
:func:`~baton.subagents.context.current_agent`. Profiles name tools from a catalogue (a mapping of
name to :class:`~baton.engine.Tool`), or by import path ``package.module:attribute``.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field

from baton.engine import Tool, ToolResult, tool
from baton.subagents.context import current_agent
from baton.subagents.png import write_picture

SEND_MESSAGE = "send_message"


def _is_result(args: Mapping[str, object]) -> bool:
    return args.get("type", "result") == "result"


@tool(name=SEND_MESSAGE, terminal=_is_result)
async def send_message(
    content: Annotated[str, Field(description="what to tell the lead")],
    type: Annotated[
        Literal["result", "progress"],
        Field(description="'result' when the task is done (ends your work), else 'progress'"),
    ] = "result",
    to: Annotated[Literal["lead"], Field(description="who gets it: always the lead")] = "lead",
) -> str:
    """Send a message to the lead: your final result (type 'result'), or a progress note."""
    agent = current_agent()
    if type == "progress":
        await agent.report(content)
        return "progress sent to the lead; carry on with the task"
    agent.record_result(content)
    return "result recorded; it goes to the lead with every media URL you produced"


@tool(timeout_s=60, media=True)
async def generate_image(prompt: str) -> ToolResult:
    """Draw a picture of the prompt and save it as a PNG file; returns the file's URL.

    Args:
        prompt: what the picture should show
    """
    agent = current_agent()
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:12]
    name = f"{agent.agent}-{digest}.png"
    path = write_picture(agent.media_dir / agent.session, name, prompt)
    url = path.resolve().as_uri()
    return ToolResult(f"Generated an image for {prompt!r}: {url}", [url])


@tool
async def summarise(text: str) -> str:
    """Summarise a text: its first sentence and how long it is.

    Args:
        text: the text to summarise
    """
    first = text.strip().split(". ")[0].strip()
    return f"Summary: {first[:200]} ({len(text.split())} words)"


@tool(needs_approval=True)
async def publish(text: str) -> ToolResult:
    """Publish a text for everyone to read; returns the URL of the published text.

    Args:
        text: what to publish
    """
    # The demo of a tool a person must approve (the built-in publisher profile): what it does
    # is harmless — it writes the text to a file under the media directory — but it happens
    # only once the call is approved, so an approval flow can be tried with the offline model.
    agent = current_agent()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    directory = agent.media_dir / agent.session
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{agent.agent}-{digest}.txt"
    partial = path.with_suffix(".txt.part")
    partial.write_text(text + "\n", encoding="utf-8")
    partial.replace(path)  # a re-run after a crash writes the same file
    url = path.resolve().as_uri()
    return ToolResult(f"Published the text: {url}", [url])


def builtin_tools() -> dict[str, Tool]:
    """The catalogue profiles draw from by name."""
    return {t.name: t for t in (send_message, generate_image, summarise, publish)}


def import_tool(path: str) -> Tool:
    """Load ``package.module:attribute`` as a tool (a :class:`Tool`, or a typed function).

    Raises ``LookupError``/``ImportError``/``TypeError`` with a message the profile loader shows.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise LookupError(f"{path!r} is not an import path of the form package.module:attribute")
    module = importlib.import_module(module_name)
    try:
        found = getattr(module, attribute)
    except AttributeError as exc:
        raise LookupError(f"module {module_name!r} has no attribute {attribute!r}") from exc
    if isinstance(found, Tool):
        return found
    if callable(found):
        return Tool(found)
    raise TypeError(f"{path!r} is a {type(found).__name__}, not a tool or a function")

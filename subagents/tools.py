"""The built-in tool catalogue of sub-agents: how they report, and demo tools for the offline model
(``publish`` is the one that needs a person's approval), and the two tools that ask a person for a
file or an image.

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

from baton.engine import Tool, ToolResult, ToolRun, tool
from baton.engine.media import file_upload_tool, image_tool
from baton.media import extension_for
from baton.media.store import CONTENT_TYPES
from baton.subagents.context import current_agent
from baton.subagents.png import picture_for

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


# A real model may take a minute or more (IMAGE_TIMEOUT_S).
@tool(run=ToolRun(timeout_s=180, media=True))
async def generate_image(prompt: str) -> ToolResult:
    """Draw a picture of the prompt and save it as an image file; returns the file's URL.

    Args:
        prompt: what the picture should show
    """
    # With a model endpoint, the Images API draws it (baton.subagents.images); offline, the demo
    # painter does. Either way the media store keeps it: a URL the lead can open wherever this
    # worker runs (docs/media.md).
    agent = current_agent()
    if agent.images is not None:
        picture = await agent.images.generate(prompt)
        data, content_type = picture.data, picture.content_type
    else:
        data, content_type = picture_for(prompt), "image/png"
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:12]
    name = f"{agent.session}/{agent.agent}-{digest}{extension_for(content_type)}"
    url = await agent.media_store().put(data, name, content_type)
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
    # is harmless — it puts the text in the media store — but it happens only once the call is
    # approved, so an approval flow can be tried with the offline model.
    agent = current_agent()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    name = f"{agent.session}/{agent.agent}-{digest}.txt"  # a re-run writes the same one
    url = await agent.media_store().put((text + "\n").encode(), name, CONTENT_TYPES[".txt"])
    return ToolResult(f"Published the text: {url}", [url])


def builtin_tools() -> dict[str, Tool]:
    """The catalogue profiles draw from by name: the questions to a person
    (``request_file_upload``, ``describe_image``: docs/protocol.md, *Questions*) among them.
    A new mapping each call, of the same shared tools."""
    asks = (file_upload_tool(), image_tool())
    return {t.name: t for t in (send_message, generate_image, summarise, publish, *asks)}


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

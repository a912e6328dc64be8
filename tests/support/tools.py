"""Tools the tests give sub-agents through profile import paths (``tests.support.tools:NAME``),
in this process or in the ``baton`` processes the CLI tests start.

``publish`` needs a human's approval, so a sub-agent calling it asks over the bus and waits;
``exhibit`` too, and it makes media (a declined call leaves its agent with none: incomplete work);
``ponder`` blocks for a long time, so a session is reliably mid-work when a test interrupts it;
``hold`` works until the file named by ``BATON_TEST_RELEASE`` appears.
"""

from __future__ import annotations

import os

import anyio

from baton.engine import ToolResult, ToolRun, tool
from baton.media.store import CONTENT_TYPES
from baton.subagents.context import current_agent


@tool(needs_approval=True)
async def publish(text: str) -> str:
    """Publish a text for everyone to read.

    Args:
        text: what to publish
    """
    return f"published {text!r}"


@tool(needs_approval=True, run=ToolRun(media=True))
async def exhibit(text: str) -> ToolResult:
    """Put a text up in the gallery for everyone to see; returns the URL of its card.

    Args:
        text: what to put up
    """
    agent = current_agent()
    name = f"{agent.session}/{agent.agent}-card.txt"
    url = await agent.media_store().put((text + "\n").encode(), name, CONTENT_TYPES[".txt"])
    return ToolResult(f"Exhibited the text: {url}", [url])


@tool(run=ToolRun(timeout_s=300))
async def ponder(text: str) -> str:
    """Think about a text for as long as it takes.

    Args:
        text: what to think about
    """
    await anyio.sleep(300)
    return f"pondered {text!r}"


@tool(run=ToolRun(timeout_s=300))
async def hold(text: str) -> str:
    """Work on a text until the test says the work may finish.

    Args:
        text: what to work on
    """
    release = anyio.Path(os.environ["BATON_TEST_RELEASE"])
    # Another process (the test) creates the file: there is no event to wait on across processes.
    while not await release.exists():  # noqa: ASYNC110
        await anyio.sleep(0.05)
    return f"held {text!r}"

"""Tools the server tests give sub-agents by import path (``tests.server.tools:NAME``)."""

from __future__ import annotations

from baton.engine import tool


@tool(needs_approval=True)
async def publish(text: str) -> str:
    """Publish a text for everyone to read.

    Args:
        text: what to publish
    """
    return f"published {text!r}"

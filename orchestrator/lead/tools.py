"""The lead's ``send_message`` tool: how it delegates, follows up and stops sub-agents.

Its ``to`` parameter is a plain string on purpose. The schema advertises the profile names as an
``enum`` (so a model — and the offline model, which assigns tasks round-robin over that enum —
picks real names), but validation accepts any string, so a model that invents a name gets the
lead's own recovery hint listing the profiles and what each does, not a bare validation error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Literal

from pydantic import Field, JsonValue

from baton.engine import Tool

SendKind = Literal["task", "message", "shutdown"]
Deliver = Callable[[str, str, SendKind], Awaitable[str]]
"""``deliver(to, content, type)`` -> the text the model gets back."""

SEND_MESSAGE = "send_message"


def send_message_tool(deliver: Deliver, profiles: Mapping[str, str]) -> Tool:
    """``send_message(to, content, type)`` bound to one lead's ``deliver``."""

    async def send_message(to: str, content: str, type: SendKind = "task") -> str:
        """Send a task or a message to a sub-agent (starting it if it is not running), or stop one.

        Results come back to you later as "[result from <name>] ..." blocks: do not wait for them.
        """
        return await deliver(to, content, type)

    names = list(profiles)
    to_field = Field(
        description=(
            "the sub-agent's name: a profile name (one of the enum), or '<profile>-<n>' "
            "for another agent of the same profile"
        ),
        json_schema_extra={"enum": list[JsonValue](names)} if names else None,
    )
    send_message.__annotations__ = {
        "to": Annotated[str, to_field],
        "content": Annotated[str, Field(description="the task or message, self-contained")],
        "type": Annotated[
            SendKind,
            Field(description="'task' for new work, 'message' to follow up, 'shutdown' to stop it"),
        ],
        "return": str,
    }
    return Tool(send_message, name=SEND_MESSAGE)


def unknown_agent_hint(name: str, profiles: Mapping[str, str]) -> str:
    """The recovery hint for a name no profile matches: what exists, and what to do next."""
    if not profiles:
        return (
            f"Did not send: there is no sub-agent named {name!r} and no profiles are configured. "
            "Do not retry; answer the user yourself."
        )
    listing = "; ".join(f"{p} ({d})" for p, d in profiles.items())
    return (
        f"Did not send: there is no sub-agent or profile named {name!r}. Available profiles: "
        f"{listing}. Call send_message again with `to` set to one of these names."
    )


def not_a_subagent_hint(name: str) -> str:
    return (
        f"Did not send: {name!r} is not a sub-agent. You are the lead: answer the user directly "
        "in your reply text."
    )

"""Routing a request: one forced choice of a profile, the request as written as its task.

A policy that judges an answer to be no answer to the request may route it instead
(:class:`~baton.lead.policy.Route`; the guided policy does, lead/guided.py). Small models answer
work they cannot do without doing it, and asked to *write* a delegation they run away in the task
text or invent a picture; what they do reliably is pick one name from an enum when a tool call is
required (the server then constrains the output to the schema). So routing is one request offering
only ``route(to)``, ``to`` one of the profiles, with ``tool_choice="required"``; with one profile
to choose from, it goes there with no request. The chosen profile gets the person's request,
exactly as written, as its task (a second profile chosen for the same request is refused as a
repeat, like any task sent twice: one agent does the whole request). The request is
self-contained by construction (a person wrote it to the lead), so no model has to restate it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated

from pydantic import Field, JsonValue

from baton.engine import Tool, ToolResult

ROUTE = "route"

ROUTE_NOTE = (
    "Your answer did not do the request: it is work for your sub-agents. Choose who does it: "
    "call route once, with `to` set to the profile that fits it best. The request is passed "
    "on to it exactly as the user wrote it."
)
"""What the routing request adds to the lead's context (in a copy: the real context gets the
sends as ``send_message`` calls, lead/checkpoint.py ``turn_messages``)."""

RouteTo = Callable[[str], Awaitable[str | ToolResult]]
"""``route(profile)`` -> what ``send_message`` answered for the request sent to that profile."""


def route_tool(profiles: Mapping[str, str], route: RouteTo) -> Tool:
    """``route(to)`` (terminal), ``to`` an enum of the profiles, each described."""

    async def route_(to: str) -> str | ToolResult:
        return await route(to)

    listing = "; ".join(f"{name}: {description}" for name, description in profiles.items())
    to_field = Field(
        description=f"the profile that does the request ({listing})",
        json_schema_extra={"enum": list[JsonValue](profiles)},
    )
    route_.__annotations__ = {"to": Annotated[str, to_field], "return": str | ToolResult}
    return Tool(
        route_,
        name=ROUTE,
        terminal=True,
        description="Hand the user's request, as written, to a new sub-agent of a profile.",
    )

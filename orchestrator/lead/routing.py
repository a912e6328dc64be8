"""Routing a request: one forced choice of a profile, the request as written as its task.

A policy that judges an answer to be no answer to the request may route it instead
(:class:`~baton.lead.policy.Route`; the guided policy does, lead/guided.py, where the request's
words say where: the profiles it names, or for a picture the profiles that make media). Small
models answer work they cannot do without doing it, and asked to *write* a delegation they run
away in the task text or invent a picture; so the runtime sends the person's request, exactly as
written, as the task (it is self-contained by construction: a person wrote it to the lead, so no
model has to restate it). With one profile to go to, or ``each`` (the request named them all),
no model is asked. With several, one request offers only ``route(to)``, ``to`` one of them, with
``tool_choice="required"`` (a server that decodes under the schema keeps the output to the
enum); a second profile chosen for the same request is refused as a repeat, like any task sent
twice: one agent does the whole request. The model is never asked to choose where the request's
words did not narrow the choice: at 1.5B parameters that choice was no better than chance
(docs/small-models.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated

import anyio
from pydantic import Field, JsonValue

from baton.bus.errors import BusError
from baton.engine import AgentLoop, Tool, ToolRegistry, ToolResult
from baton.lead import prompt
from baton.lead.checkpoint import LastTurn, turn_messages
from baton.lead.state import LeadState
from baton.lead.team import Team

log = logging.getLogger(__name__)

ROUTE_TIMEOUT_S = 120.0
"""The routing request (one constrained call) runs at most this long."""

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

    to_field = Field(
        description=f"the profile that does the request ({prompt.listing(profiles)})",
        json_schema_extra={"enum": list[JsonValue](profiles)},
    )
    route_.__annotations__ = {"to": Annotated[str, to_field], "return": str | ToolResult}
    return Tool(
        route_,
        name=ROUTE,
        terminal=True,
        description="Hand the user's request, as written, to a new sub-agent of a profile.",
    )


class Router:
    """Routes the current request for a lead: ``make_loop`` builds the one-round, call-required
    loop of the routing request over a registry; what it sends goes through the lead's ``team``
    and into its ``state``."""

    def __init__(
        self, make_loop: Callable[[ToolRegistry], AgentLoop], team: Team, state: LeadState
    ) -> None:
        self._make_loop = make_loop
        self._team = team
        self._state = state

    async def route(
        self,
        choices: Mapping[str, str],
        deadline: float,
        *,
        each: bool = False,
        before_send: Callable[[], Awaitable[None]] | None = None,
    ) -> bool:
        """One request offering only ``route(to)`` among ``choices`` (with one, or ``each``: to
        every one of them, no request); the chosen profile gets the request as written.
        ``before_send`` runs once, just before the first send (the answer is then not the answer:
        the caller takes back what it showed). What it sent goes into the context as the
        ``send_message`` calls they were (the route tool is not the lead's), and the lead waits
        for the results (True). Nothing sent (the call failed or was refused): False, and the
        answer stands."""
        state = self._state
        request = state.progress.request
        if not request.strip() or not choices:
            return False
        self._team.new_turn()
        announced = False

        async def route_to(profile: str) -> str | ToolResult:
            nonlocal announced
            if not announced and before_send is not None:
                announced = True
                await before_send()
            return await self._team.delegate(profile, request)

        if len(choices) == 1 or each:  # no model call to choose
            try:
                if before_send is not None:
                    await before_send()
                for profile in choices:  # the same request to each: no repeat of the model's
                    await self._team.delegate(profile, request, once=False)
            except BusError as exc:  # as a tool's error would be: nothing sent, the answer stands
                log.warning("session %s: could not route the request: %s", state.session, exc)
        else:
            await self._choose(choices, ROUTE_NOTE, route_to, deadline)
        sends = list(state.turn_sends)
        state.turn_sends.clear()
        state.waves.count(len(sends))
        if not sends:
            log.info("session %s: routing the request sent nothing", state.session)
            return False
        state.history.extend(turn_messages(sends))
        state.progress.phase, state.progress.last = "gather", LastTurn()
        return True

    async def _choose(
        self, choices: Mapping[str, str], note: str, route_to: RouteTo, deadline: float
    ) -> None:
        """The routing request: the lead's context and ``note``, only ``route(to)`` offered."""
        asked = [*self._state.history, prompt.note_block("check", note)]
        router = self._make_loop(ToolRegistry([route_tool(choices, route_to)]))
        with anyio.move_on_after(min(ROUTE_TIMEOUT_S, deadline - anyio.current_time())):
            await router.run_turn(asked)

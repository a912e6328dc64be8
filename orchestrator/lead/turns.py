"""The lead's turns: its model asked one turn at a time, over the context they share.

:class:`LeadTurns` is the half of the lead that talks to its model. It runs one engine turn under
the session deadline while the inbox is watched (bus/interrupt.py: a ``shutdown`` from outside
cancels the lead at once), asked without tools once this request's delegation waves are spent or
the final answer is due; it adds the session's notes to the context, takes what arrived into it
(checkpointed, then acked), and takes back what a turn showed the views when that reply is not
the answer (lead/shown.py). Which step comes next is the lead's loop's (lead/agent.py); this only
runs the steps that put something in front of the model.
"""

from __future__ import annotations

import logging

import anyio

from baton.bus.events import RETRACTED_DEADLINE, Event, RoundStarted
from baton.bus.interrupt import RoundWatch
from baton.bus.messages import Envelope
from baton.engine import AgentLoop, StopReason, ToolRegistry, TurnResult
from baton.engine.loop_options import LoopOptions, LoopParts
from baton.lead import prompt
from baton.lead.delegation import delegation_rewriter
from baton.lead.options import LeadOptions, LeadParts
from baton.lead.prompt import LEAD_NAME
from baton.lead.shown import ShownText
from baton.lead.state import LeadState
from baton.lead.team import Team, TeamHooks
from baton.lead.tools import SEND_MESSAGE
from baton.llm.types import ChatModel

log = logging.getLogger(__name__)


class LeadTurns:
    """The lead's engine turns, notes and intake into its context; see the module docstring.

    ``hooks`` are the lead's, as the team has them: whether it was cancelled, how to cancel it
    (the watch's ``shutdown``), and how to checkpoint a step (``saved``: the whole step, here).
    """

    def __init__(
        self,
        model: ChatModel,
        registry: ToolRegistry,
        state: LeadState,
        team: Team,
        *,
        options: LeadOptions,
        parts: LeadParts,
        hooks: TeamHooks,
    ) -> None:
        self.state = state
        self.team = team
        self.session = state.session
        self._hooks = hooks
        self.routes = options.tool_choice != "none"
        """Whether the lead may be offered tools at all (``tool_choice="none"`` never is)."""
        self.tools_offered = False
        """Whether the last turn was offered tools (asked without them, it could not delegate)."""
        self.shown = None if parts.events is None else ShownText(self.session, parts.events)
        self.engine = AgentLoop(
            model,
            registry,
            session=self.session,
            agent=LEAD_NAME,
            options=LoopOptions(limits=options.limits, tool_choice=options.tool_choice),
            parts=LoopParts(
                channel=parts.channel,
                events=self._engine_event,
                telemetry=parts.telemetry,
                call_rewriter=delegation_rewriter(
                    team.targets, lambda: registry.names, SEND_MESSAGE
                ),
                spend=parts.spend,
            ),
        )

    @property
    def cancelled(self) -> bool:
        return self._hooks.cancelled()

    async def _engine_event(self, event: Event) -> None:
        """The lead turn's events: a round's start opens the delegation unit's round (its sends
        are one decision: news first holds all of them or none), and each goes on to the views."""
        if isinstance(event, RoundStarted):
            self.team.new_round()
        if self.shown is not None:
            await self.shown(event)

    async def run(self, deadline: float) -> TurnResult | None:
        """One engine turn under the session deadline (None: the deadline cut it).

        It is asked without tools (``tool_choice="none"``) once the delegation waves of this
        request are spent (with a note saying so, once) or the final answer is due.
        """
        state, progress = self.state, self.state.progress
        if state.waves.exhausted and not progress.waves_noted:
            progress.waves_noted = True
            self.add_note(prompt.waves_note(state.roster.media_urls, state.roster.outstanding))
        self.team.new_turn()
        without_tools = progress.final_due or state.waves.exhausted
        self.tools_offered = self.routes and not without_tools
        if self.shown is not None:
            self.shown.new_turn()
        result = await self._watched(deadline, without_tools)
        state.waves.count(self.team.dispatch.sends.sends)
        if result is None:
            log.warning("session %s: the lead's turn was cut by the session deadline", self.session)
            await self.retract_shown(RETRACTED_DEADLINE)  # the late answer streams anew
        elif result.stop not in (StopReason.ERROR, StopReason.BUDGET):
            progress.final_due = False
        state.turn_sends.clear()
        return result

    async def _watched(self, deadline: float, without_tools: bool) -> TurnResult | None:
        """The engine turn, with the inbox watched while it runs (bus/interrupt.py): a
        ``shutdown`` from outside cancels the lead at once, mid-model-request or mid-approval;
        anything else read is noted and kept for the next gather. None: the deadline cut it."""
        watch = RoundWatch(
            self.team.inbox, stops=self.team.stops_a_turn, read=self.team.read_during_turn
        )
        history = self.state.history
        result: TurnResult | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(watch.watch, self._hooks.stop)
            try:
                with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                    if without_tools:
                        result = await self.engine.run_turn(history, tool_choice="none")
                    else:
                        result = await self.engine.run_turn(history)
            finally:
                watch.end()
        return result

    def add_note(self, text: str, *, final: bool = False, kind: str = "note") -> None:
        """A note from the session in the context; ``final``: the next turns go without tools
        until one answers."""
        progress = self.state.progress
        self.state.history.append(prompt.note_block(kind, text))
        progress.final_due = progress.final_due or final

    async def take(self, arrived: list[Envelope]) -> None:
        """Put what arrived into the context (a new request starts its delegation over),
        checkpoint it, then ack it: a lead that dies in between gets it again."""
        if not arrived:
            return
        messages, request = self.team.render(arrived)
        if request is not None:
            self.state.new_request(request)
        self.state.history.extend(messages)
        self.state.took([envelope.id for envelope in arrived])
        await self._hooks.saved()
        await self.team.ack(arrived)

    async def retract_shown(self, why: str) -> None:
        """Take back what the current turn showed of the lead's reply (lead/shown.py)."""
        if self.shown is not None:
            await self.shown.retract(why)

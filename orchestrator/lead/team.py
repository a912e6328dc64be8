"""The lead's delegation unit: who works for it, what it sent them, and what came back, under one
lock.

:class:`Team` owns the three sides of delegation that must agree with each other: the roster
(lead/roster.py, in the lead's state), the sends (:class:`~baton.lead.dispatch.Dispatcher`) and
the inbox (:class:`~baton.lead.intake.Intake`). One lock serialises every send and every noting of
the inbox, so "a message sent after an agent's last read" is well defined, and each send first
reads the inbox without waiting (an agent whose final result already sits there is known to have
left). Nothing calls back into the lead: what a send changed is in the lead's state, and the
team tells the lead's checkpointing (``saved``) before it announces a started agent, so a viewer
that saw an agent start can count on a resumed lead knowing it.

It also keeps the ``send_message`` tool's ``to`` enum equal to the profiles plus the running
agents, swapping the tool in the lead's registry as the roster changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio

from baton.bus.base import Bus
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope, SpawnRequest
from baton.engine import EventSink, Telemetry, Tool, ToolRegistry, ToolResult
from baton.lead import prompt
from baton.lead.dispatch import Delegating, Dispatcher
from baton.lead.fan_out import FanOut
from baton.lead.intake import Intake, Noted
from baton.lead.prompt import LEAD_NAME
from baton.lead.state import LeadState
from baton.lead.tools import SendKind, not_a_subagent_hint, send_message_tool
from baton.lead.trust import ReportCheck
from baton.llm.types import Message


@dataclass(frozen=True, slots=True)
class TeamHooks:
    """What the team tells its lead, and asks of it."""

    cancelled: Callable[[], bool]
    """Whether the lead was cancelled (bus retries then give up)."""
    stop: Callable[[], None]
    """Someone outside the session asked it to stop (a ``shutdown`` to the lead)."""
    saved: Callable[[], Awaitable[None]]
    """A send changed the state: checkpoint it (mid-turn) before anything is announced."""


class Team:
    """See the module docstring."""

    def __init__(
        self,
        bus: Bus,
        state: LeadState,
        delegating: Delegating,
        *,
        events: EventSink | None,
        telemetry: Telemetry,
        hooks: TeamHooks,
        media_dir: Path | None,
    ) -> None:
        session = state.session
        self.state = state
        self.roster = state.roster
        self.lock = anyio.Lock()
        self.dispatch = Dispatcher(
            bus,
            state,
            delegating,
            events=events,
            telemetry=telemetry,
            give_up=hooks.cancelled,
        )
        self.fan_out = FanOut(self.dispatch)
        inbox = InboxReader(bus, session, LEAD_NAME)
        self.intake = Intake(
            inbox,
            state,
            check=ReportCheck(bus, session, state.roster, hooks.cancelled),
            cancelled=hooks.cancelled,
            events=events,
            media_dir=media_dir,
        )
        self._hooks = hooks
        self._early: list[Envelope] = []
        """Read before a send (to keep the roster current), not yet in the context."""
        self._registry: ToolRegistry | None = None
        self._offered: tuple[str, ...] = ()
        self._round_news: list[str] | None = None
        """Who had reported unseen when the current round's first send was made (None: no send
        yet): the round's sends are held when any had."""

    @property
    def inbox(self) -> InboxReader:
        return self.intake.inbox

    # -- the tool -------------------------------------------------------------------------------

    def targets(self) -> list[str]:
        """What ``to`` offers: every profile, then every running agent not named like one."""
        profiles = self.roster.profiles
        return [*profiles, *(n for n in self.roster.running if n not in profiles)]

    def send_tool(self) -> Tool:
        self._offered = tuple(self.targets())
        return send_message_tool(partial(self.deliver, news_first=True), self._offered)

    def attach(self, registry: ToolRegistry) -> None:
        """The lead's tools: ``send_message`` is swapped in it as the roster changes."""
        self._registry = registry
        self.roster_changed()

    def roster_changed(self) -> None:
        """Offer the running agents as they start and stop (schemas are read per request)."""
        if self._registry is not None and tuple(self.targets()) != self._offered:
            self._registry.replace(self.send_tool())

    # -- sends ----------------------------------------------------------------------------------

    async def deliver(
        self,
        to: str,
        content: str,
        kind: SendKind,
        items: list[str] | None = None,
        *,
        once: bool = True,
        news_first: bool = False,
    ) -> str | ToolResult:
        """``send_message``: the inbox read first, then routed, capped and sent (``once``: see
        :meth:`Dispatcher.deliver`; ``items``: one agent per declared item,
        :meth:`FanOut.deliver_items`). ``news_first`` (the model's own sends): while results the
        model has not seen are waiting when a round's first send is made, no send of the round
        is made and the turn ends, so the model decides again with them in view; a 1.5B lead
        sent five new agents a question each, round after round, while the first one's answer
        sat unread (results read mid-turn wait for the next turn). A round's calls are one
        decision: a result that comes in between two of them holds neither."""
        if to in (LEAD_NAME, "user"):
            return not_a_subagent_hint(to)
        async with self.lock:
            await self._settle(await self.intake.note(await self.intake.read_now()), early=True)
            if news_first and kind != "shutdown":
                if self._round_news is None:
                    self._round_news = self._unseen_reports()
                if self._round_news:
                    return ToolResult(prompt.news_first(self._round_news), ends_turn=True)
            if items and kind == "task":  # a follow-up or a shutdown declares nothing
                done = await self.fan_out.deliver_items(to, content, items, kind)
            else:
                done = await self.dispatch.deliver(to, content, kind, once=once)
            self.roster_changed()
            if done.sent:
                await self._hooks.saved()
            for started in done.started:
                await self.dispatch.announce(started)
        return done.reply

    async def delegate(
        self, profile: str, task: str, *, once: bool = True, news_first: bool = False
    ) -> str | ToolResult:
        """A task to a new agent of ``profile`` (a per-profile tool's call: ``news_first``, or
        routing)."""
        return await self.deliver(profile, task, "task", once=once, news_first=news_first)

    @property
    def news_waiting(self) -> bool:
        """Whether messages were read (during a turn, or by a send) that are not in the lead's
        context yet: the next gather puts them there."""
        return bool(self._early)

    def _unseen_reports(self) -> list[str]:
        """The sub-agents whose final results were read and are not in the context yet."""
        return list(dict.fromkeys(e.sender for e in self._early if e.type == "result" and e.sender))

    def pending_spawns(self) -> list[tuple[SpawnRequest, str]]:
        """The spawn requests of running agents and their receipts (a resumed session's watch
        follows them as it follows the ones sent now; lead/roster.py ``spawn_receipt``)."""
        delegating = self.dispatch.delegating
        return [
            (
                SpawnRequest(
                    id=record.spawn_id,
                    session=self.state.session,
                    agent=record.name,
                    profile=record.profile,
                    pool=delegating.pool,
                    approve=delegating.approve,
                ),
                record.spawn_receipt,
            )
            for record in self.roster.agents.values()
            if record.state == "running" and record.spawn_receipt and record.spawn_id
        ]

    def new_turn(self) -> None:
        """A turn of the lead starts: its caps start over, and it has sent nothing yet."""
        self.dispatch.sends.reset()
        self.state.turn_sends.clear()
        self.new_round()

    def new_round(self) -> None:
        """A round of the lead's turn starts (its model request is made): whether news holds
        its sends is decided at its first send."""
        self._round_news = None

    # -- the inbox ------------------------------------------------------------------------------

    async def _settle(self, noted: Noted, *, early: bool = False) -> None:
        """What a read of the inbox means for the team (the lock held): hand a departed agent's
        unseen messages over, follow the roster in the tool, pass a shutdown on."""
        for name, unseen in noted.handovers:
            started = await self.dispatch.hand_over(name, unseen)
            if started is not None:
                await self._hooks.saved()
                await self.dispatch.announce(started)
        self.roster_changed()
        if early:
            self._early.extend(noted.envelopes)
        if noted.shutdown:
            self._hooks.stop()

    async def read_during_turn(self) -> list[Envelope]:
        """Read the lead's inbox while a turn runs (lead/turns.py watches it): under the lock,
        read and noted at once, kept for the next gather; returns what was read."""
        async with self.lock:
            noted = await self.intake.note(await self.intake.read_now())
            await self._settle(noted, early=True)
        return noted.envelopes

    def stops_a_turn(self, envelope: Envelope) -> bool:
        """A ``shutdown`` from outside the team (a person, ``baton cancel``): it cancels the
        lead, mid-turn too."""
        return envelope.type == "shutdown" and not self.roster.is_agent(envelope.sender)

    async def collect(
        self, until: float, enough: Callable[[list[Envelope]], bool], *, stoppable: bool = True
    ) -> list[Envelope]:
        """What arrived (and what a send read early) until ``enough(arrived)`` or ``until`` (a
        cancelled lead stops waiting, unless not ``stoppable``)."""
        arrived, self._early = self._early, []

        async def take(fresh: list[Envelope]) -> bool:
            async with self.lock:
                noted = await self.intake.note(fresh)
                await self._settle(noted)
            arrived.extend(noted.envelopes)
            return enough(arrived)

        await self.intake.wait(take, until, stoppable=stoppable)
        return arrived

    async def gather(self, deadline: float) -> tuple[list[Envelope], bool]:
        """What arrived, waiting while sub-agents work and nobody asked anything new; and
        whether the session deadline passed first."""

        def enough(arrived: list[Envelope]) -> bool:
            return not self.roster.outstanding or any(self.intake.is_request(e) for e in arrived)

        arrived = await self.collect(deadline, enough)
        return arrived, not enough(arrived) and anyio.current_time() >= deadline

    async def gather_news(self, deadline: float, backoff: float) -> tuple[list[Envelope], bool]:
        """After a failed turn: what is there now; while sub-agents work, whatever arrives
        first or nothing within ``backoff`` (bounded by the deadline)."""
        until = min(deadline, anyio.current_time() + backoff)
        arrived = await self.collect(until, bool)
        return arrived, not arrived and anyio.current_time() >= deadline

    def render(self, arrived: Sequence[Envelope]) -> tuple[list[Message], str | None]:
        return self.intake.render(arrived)

    async def ack(self, arrived: Sequence[Envelope]) -> None:
        if arrived:
            await self.intake.ack(arrived)

    async def stop_agents(self, grace: float) -> None:
        """``shutdown`` to every outstanding sub-agent (one no worker claimed is withdrawn), then
        wait (``grace``) for their results, noted and acked."""
        early, self._early = self._early, []
        await self.ack(early)
        async with self.lock:
            await self.dispatch.shut_down_running("the session is ending")
            self.roster_changed()
        if not self.roster.outstanding:
            return

        def enough(arrived: list[Envelope]) -> bool:
            return not self.roster.outstanding

        with anyio.move_on_after(grace):
            until = anyio.current_time() + grace
            await self.ack(await self.collect(until, enough, stoppable=False))

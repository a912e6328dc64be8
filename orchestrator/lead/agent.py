"""The lead agent: a streaming engine turn per step, and the macro-loop that waits for sub-agents.

The engine's :class:`~baton.engine.AgentLoop` runs the micro-loop of one lead turn (model →
``send_message`` and user tools → model … until it answers). :class:`Lead` runs the loop around it::

    history = [system prompt with the profiles, the task]
    while True:
        cancelled?                                    -> cancelled
        run one engine turn (tokens stream out as events)
        model error?                                  -> failed
        gather the inbox: results, progress, follow-ups; wait (bounded) while sub-agents are
          outstanding and nobody asked anything new
        timed out?                                    -> one last turn with a note -> timed_out
        nothing new and nothing outstanding?          -> completed (the last turn's text)
        put what arrived into the context, ack it
    cancelled / timed out / failed: shutdown to every outstanding sub-agent (bounded grace)

So the lead writes its final answer only once every delegated result is in its context. Nothing
here imports ``subagents``: profiles arrive as plain ``name -> description``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, TypeVar

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusError, BusUnreachable, InvalidEnvelope
from baton.bus.events import AgentSpawned
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope, SpawnRequest, make_envelope
from baton.bus.retry import persist
from baton.engine import (
    AgentLoop,
    EventSink,
    InteractionChannel,
    LoopLimits,
    StopReason,
    Telemetry,
    Tool,
    TurnResult,
)
from baton.lead import prompt
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Roster, Sent
from baton.lead.tools import (
    SendKind,
    not_a_subagent_hint,
    send_message_tool,
    unknown_agent_hint,
)
from baton.llm.types import ChatModel, Message

log = logging.getLogger(__name__)

T = TypeVar("T")

LeadStatus = Literal["completed", "incomplete", "failed", "cancelled", "timed_out"]
"""``incomplete``: the lead answered, but work was delegated and no sub-agent delivered a result,
or the answer cites URLs that no tool produced while none were produced (docs/protocol.md)."""
MAX_WAIT_S = 60.0
"""One inbox wait; the wait is repeated until the session deadline."""


@dataclass(frozen=True, slots=True)
class LeadOutcome:
    """How the lead's work ended, its last answer and every media URL its sub-agents reported."""

    status: LeadStatus
    answer: str
    media_urls: list[str] = field(default_factory=list)
    error: str = ""


class Lead:
    """The lead of one session; build it, then ``await lead.run(task)`` once.

    ``cancel()`` (from any task of the same event loop) ends the current turn and any inbox wait at
    once; ``run`` then shuts the sub-agents down and returns ``cancelled``.
    """

    def __init__(
        self,
        bus: Bus,
        model: ChatModel,
        *,
        session: str,
        profiles: Mapping[str, str],
        tools: Iterable[Tool] = (),
        events: EventSink | None = None,
        channel: InteractionChannel | None = None,
        limits: LoopLimits | None = None,
        instructions: str | None = None,
        timeout_s: float = 600.0,
        shutdown_grace_s: float = 1.0,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.bus = bus
        self.session = session
        self.roster = Roster(profiles)
        self.timeout_s = timeout_s
        self.shutdown_grace_s = shutdown_grace_s
        self.history: list[Message] = [
            {"role": "system", "content": prompt.system_prompt(profiles, instructions)}
        ]
        self._emit = events
        self._engine = AgentLoop(
            model,
            [send_message_tool(self.deliver, profiles), *tools],
            session=session,
            agent=LEAD_NAME,
            limits=limits,
            channel=channel,
            events=events,
            telemetry=telemetry,
        )
        self._send_lock = anyio.Lock()
        self.inbox = InboxReader(bus, session, LEAD_NAME)
        """The lead's inbox, read the way every agent reads its own (through bus blips too)."""
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """End the current turn and any wait now; ``run`` then stops the sub-agents."""
        self._cancelled = True
        self._engine.cancel()
        self.inbox.interrupt()

    # -- the macro-loop -------------------------------------------------------------------------

    async def run(self, task: str) -> LeadOutcome:
        """Work on ``task`` until answered with nothing outstanding, cancelled, failed or late."""
        self.history.append({"role": "user", "content": task})
        deadline = anyio.current_time() + self.timeout_s
        try:
            outcome = await self._loop(deadline)
        except anyio.get_cancelled_exc_class():
            self.cancel()  # so the shielded shutdown below gives up on a bus that stays away
            with anyio.CancelScope(shield=True):
                try:
                    await self.stop_agents()
                except BusError as exc:  # recorded; the cancellation is what propagates
                    log.warning("session %s: could not stop the sub-agents: %s", self.session, exc)
            raise
        if outcome.status != "completed":
            await self.stop_agents()
        return LeadOutcome(outcome.status, outcome.answer, self.roster.media_urls, outcome.error)

    async def _loop(self, deadline: float) -> LeadOutcome:
        while True:
            if self._cancelled:
                return LeadOutcome("cancelled", self._last_text())
            result = await self._turn()
            if result.stop is StopReason.CANCELLED or self._cancelled:
                return LeadOutcome("cancelled", result.text)
            if result.stop is StopReason.ERROR:
                return LeadOutcome("failed", result.text, error=str(result.error or "model error"))
            arrived, late = await self._gather(deadline)
            await self._take(arrived)
            if self._cancelled:
                return LeadOutcome("cancelled", result.text)
            if late:
                return await self._late_answer()
            if not arrived:
                return LeadOutcome("completed", result.text)

    async def _turn(self) -> TurnResult:
        return await self._engine.run_turn(self.history)

    async def _late_answer(self) -> LeadOutcome:
        """The session timed out with work outstanding: one last turn, told what is missing."""
        missing = ", ".join(self.roster.outstanding)
        self.history.append(
            prompt.note_block(
                "error",
                f"The session timed out after {self.timeout_s:g} s; still no result from: "
                f"{missing}. Do not delegate again: answer now with what you have.",
            )
        )
        result = await self._turn()
        return LeadOutcome("timed_out", result.text)

    def _last_text(self) -> str:
        for message in reversed(self.history):
            if message.get("role") == "assistant" and isinstance(message.get("content"), str):
                return str(message.get("content"))
        return ""

    # -- the inbox ------------------------------------------------------------------------------

    async def _gather(self, deadline: float) -> tuple[list[Envelope], bool]:
        """What arrived, waiting while sub-agents work and nobody asked anything new.

        Returns the envelopes and whether the session deadline passed first.
        """
        arrived: list[Envelope] = []

        async def take(fresh: list[Envelope]) -> bool:
            arrived.extend(await self._note(fresh))
            return not self.roster.outstanding or any(self._is_request(e) for e in arrived)

        ending = await self.inbox.collect(
            take, deadline=deadline, slice_s=MAX_WAIT_S, stop=lambda: self._cancelled
        )
        return arrived, ending == "timed_out"

    async def _note(self, fresh: list[Envelope]) -> list[Envelope]:
        """Reports update the roster as they are read; a shutdown from outside cancels."""
        for envelope in fresh:
            if envelope.type == "shutdown" and not self.roster.is_agent(envelope.sender):
                log.info("session %s: shutdown requested by %s", self.session, envelope.sender)
                self.cancel()
            elif self.roster.is_agent(envelope.sender):
                unseen = self.roster.on_report(envelope)
                if unseen:
                    await self._hand_over(envelope.sender, unseen)
        return fresh

    def _is_request(self, envelope: Envelope) -> bool:
        return not self.roster.is_agent(envelope.sender) and envelope.type != "shutdown"

    async def _take(self, arrived: Sequence[Envelope]) -> None:
        """Put what arrived into the context (reports first, then requests), then ack it."""
        if not arrived:
            return
        reports = [e for e in arrived if self.roster.is_agent(e.sender)]
        requests = [e for e in arrived if self._is_request(e)]
        self.history.extend(prompt.inbox_messages(reports, requests))
        try:
            await self.inbox.ack([envelope.id for envelope in arrived], give_up=self._giving_up)
        except BusUnreachable as exc:  # cancelled during an outage: the reader's done set holds
            log.warning("session %s: left %d message(s) un-acked: %s",
                        self.session, len(arrived), exc)  # fmt: skip

    # -- delegation -----------------------------------------------------------------------------

    async def deliver(self, to: str, content: str, kind: SendKind) -> str:
        """``send_message``: send to a sub-agent, starting it first if it is not running.

        A message to an agent that already finished goes to a fresh agent of its profile.
        """
        if to in (LEAD_NAME, "user"):
            return not_a_subagent_hint(to)
        profile = self.roster.resolve(to)
        if profile is None:
            return unknown_agent_hint(to, self.roster.profiles)
        async with self._send_lock:
            if kind == "shutdown":
                if not self.roster.is_running(to):
                    return f"{to} is not running; nothing to shut down."
                await self._send(to, "shutdown", "the lead asked you to stop")
                self.roster.stopping(to)
                return f"Asked {to} to shut down; its final result will still arrive."
            target = to if to not in self.roster.agents else self._successor(to, profile)
            try:
                envelope = await self._send(target, kind, content)
            except InvalidEnvelope as exc:
                return f"Did not send to {to!r}: {exc.reason}. Fix the name or content and retry."
            started = target not in self.roster.agents
            if started:
                await self._start(target, profile)
            self.roster.sent(target, Sent(envelope.id, kind, content))
        if target != to:
            what = f"{to} had already finished, so {target} (profile {profile}) was started for it"
        else:
            what = f"{'Started' if started else 'Sent to'} {to} (profile {profile})"
        return (
            f"{what}. Its result will arrive in your inbox: do not wait or poll, answer the user "
            "now; you will be called again."
        )

    def _successor(self, name: str, profile: str) -> str:
        """Who gets a message for ``name``: itself while it runs, else a fresh agent."""
        return name if self.roster.is_running(name) else self.roster.fresh_name(profile)

    async def _send(self, to: str, kind: SendKind, content: str) -> Envelope:
        envelope = make_envelope(
            session=self.session, sender=LEAD_NAME, recipient=to, type=kind, content=content
        )
        await self._persist(partial(self.bus.send, envelope), f"send {to}")
        return envelope

    async def _start(self, name: str, profile: str) -> None:
        self.roster.started(name, profile)
        request = SpawnRequest(session=self.session, agent=name, profile=profile)
        await self._persist(partial(self.bus.submit_spawn, request), f"spawn {name}")
        if self._emit is not None:
            await self._emit(AgentSpawned(session=self.session, agent=name, profile=profile))
        log.info("session %s: spawning %s from profile %s", self.session, name, profile)

    async def _hand_over(self, name: str, unseen: Sequence[Sent]) -> None:
        """``name`` left before reading ``unseen``: a fresh agent of its profile gets them."""
        profile = self.roster.agents[name].profile
        successor = self.roster.fresh_name(profile)
        log.info("session %s: %s left %d message(s) unread; handing them to %s",
                 self.session, name, len(unseen), successor)  # fmt: skip
        async with self._send_lock:
            try:
                for index, message in enumerate(unseen):
                    envelope = await self._send(successor, message.type, message.content)
                    if index == 0:
                        await self._start(successor, profile)
                    self.roster.sent(successor, Sent(envelope.id, message.type, message.content))
            except BusUnreachable as exc:  # only once cancelled: the session is ending anyway
                log.warning(
                    "session %s: hand-over to %s abandoned: %s", self.session, successor, exc
                )

    async def stop_agents(self) -> None:
        """``shutdown`` to every outstanding sub-agent, then wait (bounded) for their results."""
        targets = [n for n in self.roster.outstanding if self.roster.agents[n].state == "running"]
        for name in targets:
            try:
                await self._send(name, "shutdown", "the session is ending")
            except BusUnreachable as exc:  # cancelled during an outage: it ends at its idle timeout
                log.warning(
                    "session %s: could not tell %s to shut down: %s", self.session, name, exc
                )
            self.roster.stopping(name)
        if not self.roster.outstanding:
            return

        async def take(fresh: list[Envelope]) -> bool:
            await self._take(await self._note(fresh))
            return not self.roster.outstanding

        grace = self.shutdown_grace_s
        with anyio.move_on_after(grace):
            await self.inbox.collect(take, deadline=anyio.current_time() + grace, slice_s=grace)

    # -- the bus --------------------------------------------------------------------------------

    def _giving_up(self) -> bool:
        """Asked by the retry policy after each failure: a cancelled lead stops retrying."""
        return self._cancelled

    async def _persist(self, operation: Callable[[], Awaitable[T]], what: str) -> T:
        """A bus write of the lead, through the one retry policy: a Redis blip stalls the lead
        (as it stalls its sub-agents) instead of failing it, until it is cancelled."""
        return await persist(operation, f"{self.session}: {what}", give_up=self._giving_up)

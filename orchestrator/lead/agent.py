"""The lead agent: a streaming engine turn per step, and the macro-loop that waits for sub-agents.

The engine's :class:`~baton.engine.AgentLoop` runs the micro-loop of one lead turn (model →
``send_message`` and user tools → model … until it answers). :class:`Lead` runs the loop around it::

    history = [system prompt with the profiles, the task]
    while True:
        cancelled?                                    -> cancelled
        run one engine turn (tokens stream out as events)
        model error (not a refused configuration)?    -> gather the inbox (while sub-agents
          work: news, or a bounded backoff) and run the turn again, at most
          ``model_failures_allowed`` times in a row
        model error for good, or the budget spent?    -> wait (bounded) for the sub-agents
          -> failed, with an answer composed from their results and every media URL
        gather the inbox: results, progress, follow-ups; wait (bounded) while sub-agents are
          outstanding and nobody asked anything new
        timed out?                                    -> one last turn with a note -> timed_out
        nothing new and nothing outstanding?          -> the last turn's text, checked
          (lead/outcome.py): completed, or incomplete
        put what arrived into the context, ack it
    cancelled / timed out / failed / incomplete: shutdown to every outstanding sub-agent

So the lead writes its final answer only once every delegated result is in its context, and its
model failing does not throw away the sub-agents' work. Nothing here imports ``subagents``:
profiles arrive as plain ``name -> description``. Sends are
:class:`~baton.lead.dispatch.Dispatcher`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusError, BusUnreachable, ExitCode
from baton.bus.events import AnswerChecked
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope
from baton.engine import (
    AgentLoop,
    EventSink,
    InteractionChannel,
    LoopLimits,
    StopReason,
    Telemetry,
    Tool,
    ToolRegistry,
    ToolResult,
    TurnResult,
)
from baton.engine.spend import Spend
from baton.lead import delegation as delegating
from baton.lead import prompt
from baton.lead.answer import answer_tool, answered_text
from baton.lead.delegation import DelegationLimits, delegation_rewriter
from baton.lead.dispatch import Dispatcher
from baton.lead.outcome import LeadOutcome as LeadOutcome
from baton.lead.outcome import LeadStatus as LeadStatus
from baton.lead.outcome import check_answer, failure_answer
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Roster
from baton.lead.tools import SEND_MESSAGE, SendKind
from baton.llm.types import ChatModel, Message, ToolChoice

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0
"""One inbox wait; the wait is repeated until the session deadline."""
FAILURE_BACKOFF_S = 2.0
"""After the n-th failed turn in a row the lead waits up to n times this for news, then retries."""


class Lead:
    """The lead of one session; build it, then ``await lead.run(task)`` once.

    ``cancel()`` (from any task of the same event loop) ends the current turn and any inbox wait at
    once; ``run`` then shuts the sub-agents down and returns ``cancelled``.

    ``tool_choice`` goes with every request that offers tools (``"required"`` also offers the
    terminal ``answer`` tool, lead/answer.py, so the lead can still reply); ``delegation`` caps
    the sends of one turn; ``spend`` is the session's shared budget; ``model_failures_allowed``
    failed turns in a row are retried; ``failure_grace_s`` bounds the wait for the sub-agents once
    the model has failed for good; ``profile_tools`` also offers one delegation tool per profile.
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
        tool_choice: ToolChoice | None = None,
        delegation: DelegationLimits | None = None,
        spend: Spend | None = None,
        model_failures_allowed: int = 2,
        failure_grace_s: float = 120.0,
        profile_tools: bool = False,
        failure_backoff_s: float = FAILURE_BACKOFF_S,
    ) -> None:
        self.bus = bus
        self.session = session
        self.roster = Roster(profiles)
        self.timeout_s = timeout_s
        self.shutdown_grace_s = shutdown_grace_s
        self.model_failures_allowed = model_failures_allowed
        self.failure_grace_s = failure_grace_s
        self.failure_backoff_s = failure_backoff_s
        self._emit = events
        self.dispatch = Dispatcher(
            bus,
            session,
            self.roster,
            limits=delegation or DelegationLimits(),
            events=events,
            give_up=self._giving_up,
            refresh=self._refresh,
        )
        registry = ToolRegistry([self.dispatch.send_tool(), *tools])
        answer = answer_tool(session, events, registry.names) if tool_choice == "required" else None
        if answer is not None:
            registry.add(answer)
        if profile_tools:
            for made in delegating.profile_tools(profiles, self._delegate, registry.names):
                registry.add(made)
        self.dispatch.tools = registry
        system = prompt.system_prompt(profiles, instructions, answer_tool=answer is not None)
        self.history: list[Message] = [{"role": "system", "content": system}]
        self._engine = AgentLoop(
            model,
            registry,
            session=session,
            agent=LEAD_NAME,
            limits=limits,
            channel=channel,
            events=events,
            telemetry=telemetry,
            tool_choice=tool_choice,
            call_rewriter=delegation_rewriter(
                self.dispatch.targets, lambda: registry.names, SEND_MESSAGE
            ),
            spend=spend,
        )
        self.inbox = InboxReader(bus, session, LEAD_NAME)
        """The lead's inbox, read the way every agent reads its own (through bus blips too)."""
        self._early: list[Envelope] = []
        """Read before a send (to keep the roster current), not yet in the context."""
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """End the current turn and any wait now; ``run`` then stops the sub-agents."""
        self._cancelled = True
        self._engine.cancel()
        self.inbox.interrupt()

    async def deliver(self, to: str, content: str, kind: SendKind) -> str | ToolResult:
        """``send_message`` (see :class:`~baton.lead.dispatch.Dispatcher`)."""
        return await self.dispatch.deliver(to, content, kind)

    async def _delegate(self, profile: str, task: str) -> str | ToolResult:
        """A per-profile delegation tool's call: a task to that profile."""
        return await self.dispatch.deliver(profile, task, "task")

    # -- the macro-loop -------------------------------------------------------------------------

    async def run(self, task: str) -> LeadOutcome:
        """Work on ``task`` until answered with nothing outstanding, cancelled, failed or late."""
        self.history.append({"role": "user", "content": task})
        deadline = anyio.current_time() + self.timeout_s
        try:
            outcome = await self._loop(deadline)
            if outcome.status in ("completed", "timed_out"):
                outcome = await self._checked(outcome)
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
        return LeadOutcome(
            outcome.status,
            outcome.answer,
            self.roster.media_urls,
            outcome.error,
            outcome.invented_urls,
        )

    async def _loop(self, deadline: float) -> LeadOutcome:
        failures = 0
        while True:
            if self._cancelled:
                return LeadOutcome("cancelled", self._last_text())
            result = await self._turn()
            if result.stop is StopReason.CANCELLED or self._cancelled:
                return LeadOutcome("cancelled", self._reply(result))
            if result.stop is StopReason.ERROR and self._retryable(result, failures):
                failures += 1
                log.warning("session %s: lead turn failed (%d of %d allowed): %s",
                            self.session, failures, self.model_failures_allowed,
                            result.error)  # fmt: skip
                arrived, late = await self._gather_news(deadline, failures)
            elif result.stop in (StopReason.ERROR, StopReason.BUDGET):
                return await self._failed(result, deadline)
            else:
                failures = 0
                arrived, late = await self._gather(deadline)
                if not arrived and not late and not self._cancelled:
                    return LeadOutcome("completed", self._reply(result))
            await self._take(arrived)
            if self._cancelled:
                return LeadOutcome("cancelled", self._reply(result))
            if late:
                return await self._late_answer()

    def _retryable(self, result: TurnResult, failures: int) -> bool:
        """A failed turn is tried again unless it failed too often or its configuration was
        refused (a wrong key, model or endpoint fails the same way every time)."""
        error = result.error
        refused = error is not None and error.exit_code == ExitCode.USAGE
        return not refused and failures < self.model_failures_allowed

    async def _turn(self) -> TurnResult:
        self.dispatch.sends.reset()
        return await self._engine.run_turn(self.history)

    @staticmethod
    def _reply(result: TurnResult) -> str:
        """The turn's reply: its ``answer`` call's text (lead/answer.py), else its last text."""
        answered = answered_text(result.terminal_call)
        return result.text if answered is None else answered

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
        if result.stop in (StopReason.ERROR, StopReason.BUDGET):
            error = str(result.error or "model error")
            return LeadOutcome("timed_out", failure_answer(error, self.roster), error=error)
        return LeadOutcome("timed_out", self._reply(result))

    async def _failed(self, result: TurnResult, deadline: float) -> LeadOutcome:
        """The model failed for good (or the budget is spent): the sub-agents' work still counts,
        so wait (bounded) for what is outstanding and answer with what they reported."""
        error = str(result.error or "model error")
        log.warning("session %s: the lead's model failed for good: %s", self.session, error)
        if self.roster.outstanding and not self._cancelled:
            until = min(deadline, anyio.current_time() + self.failure_grace_s)
            arrived = await self._collect(until, lambda _: not self.roster.outstanding)
            await self._take(arrived)
        if self._cancelled:
            return LeadOutcome("cancelled", failure_answer(error, self.roster), error=error)
        return LeadOutcome("failed", failure_answer(error, self.roster), error=error)

    async def _checked(self, outcome: LeadOutcome) -> LeadOutcome:
        """The final answer against what the tools produced (lead/outcome.py), and the event."""
        check = check_answer(outcome.answer, self.roster, self.history)
        if self._emit is not None:
            await self._emit(
                AnswerChecked(
                    session=self.session,
                    agent=LEAD_NAME,
                    missing_media=check.missing_media,
                    invented_urls=check.invented_urls,
                )
            )
        status, error = outcome.status, outcome.error
        if status == "completed" and check.incomplete:
            status, error = "incomplete", check.incomplete
        return LeadOutcome(status, check.answer, [], error, check.invented_urls)

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

        def enough(arrived: list[Envelope]) -> bool:
            return not self.roster.outstanding or any(self._is_request(e) for e in arrived)

        arrived = await self._collect(deadline, enough)
        return arrived, not enough(arrived) and anyio.current_time() >= deadline

    async def _gather_news(self, deadline: float, failures: int) -> tuple[list[Envelope], bool]:
        """After a failed turn: what is there now; while sub-agents work, whatever arrives
        first or nothing within a backoff that grows with each failure in a row (bounded by the
        deadline). With nothing outstanding there is no news to wait for: the model client has
        already backed off between its own retries."""
        now = anyio.current_time()
        backoff = self.failure_backoff_s * failures if self.roster.outstanding else 0.0
        until = min(deadline, now + backoff)
        arrived = await self._collect(until, bool)
        return arrived, not arrived and anyio.current_time() >= deadline

    async def _collect(
        self, until: float, enough: Callable[[list[Envelope]], bool]
    ) -> list[Envelope]:
        """Read the inbox (and what a send read early) until ``enough(arrived)`` or ``until``."""
        arrived, self._early = self._early, []

        async def take(fresh: list[Envelope]) -> bool:
            arrived.extend(await self._note(fresh))
            return enough(arrived)

        await self.inbox.collect(take, deadline=until, slice_s=MAX_WAIT_S, stop=self._stop)
        return arrived

    def _stop(self) -> bool:
        return self._cancelled

    async def _refresh(self) -> None:
        """Before a send (the dispatcher's lock held): read the inbox without waiting, so the
        roster knows who has finished; what was read waits for the next gather."""
        try:
            fresh = await self.inbox.read(give_up=self._giving_up)
        except BusUnreachable as exc:  # only once cancelled: the send meets the same bus
            log.warning("session %s: could not refresh the roster: %s", self.session, exc)
            return
        self._early.extend(await self._note(fresh, locked=True))

    async def _note(self, fresh: list[Envelope], *, locked: bool = False) -> list[Envelope]:
        """Reports update the roster as they are read; a shutdown from outside cancels."""
        for envelope in fresh:
            if envelope.type == "shutdown" and not self.roster.is_agent(envelope.sender):
                log.info("session %s: shutdown requested by %s", self.session, envelope.sender)
                self.cancel()
            elif self.roster.is_agent(envelope.sender):
                unseen = self.roster.on_report(envelope)
                self.dispatch.roster_changed()
                if unseen:
                    log.info("session %s: %s left %d message(s) unread; handing them over",
                             self.session, envelope.sender, len(unseen))  # fmt: skip
                    if locked:
                        await self.dispatch.hand_over(envelope.sender, unseen)
                    else:
                        async with self.dispatch.lock:
                            await self.dispatch.hand_over(envelope.sender, unseen)
        return fresh

    def _is_request(self, envelope: Envelope) -> bool:
        return not self.roster.is_agent(envelope.sender) and envelope.type != "shutdown"

    async def _take(self, arrived: Sequence[Envelope]) -> None:
        """Put what arrived into the context (reports first, then requests), then ack it."""
        if not arrived:
            return
        reports = [e for e in arrived if self.roster.is_agent(e.sender)]
        requests = [e for e in arrived if self._is_request(e)]
        if requests:
            self.dispatch.new_request()
        self.history.extend(prompt.inbox_messages(reports, requests))
        try:
            await self.inbox.ack([envelope.id for envelope in arrived], give_up=self._giving_up)
        except BusUnreachable as exc:  # cancelled during an outage: the reader's done set holds
            log.warning("session %s: left %d message(s) un-acked: %s",
                        self.session, len(arrived), exc)  # fmt: skip

    # -- stopping -------------------------------------------------------------------------------

    async def stop_agents(self) -> None:
        """``shutdown`` to every outstanding sub-agent, then wait (bounded) for their results."""
        early, self._early = self._early, []
        await self._take(early)
        await self.dispatch.shut_down_running("the session is ending")
        if not self.roster.outstanding:
            return

        async def take(fresh: list[Envelope]) -> bool:
            await self._take(await self._note(fresh))
            return not self.roster.outstanding

        grace = self.shutdown_grace_s
        with anyio.move_on_after(grace):
            await self.inbox.collect(take, deadline=anyio.current_time() + grace, slice_s=grace)

    def _giving_up(self) -> bool:
        """Asked by the retry policy after each failure: a cancelled lead stops retrying."""
        return self._cancelled

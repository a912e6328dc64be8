"""The lead agent: a streaming engine turn per step, and the macro-loop that waits for sub-agents.

The engine's :class:`~baton.engine.AgentLoop` runs the micro-loop of one lead turn (model →
``send_message`` and user tools → model … until it answers). :class:`Lead` runs the loop around it::

    history = [system prompt with the profiles, the task]
    while True:
        cancelled?                                    -> cancelled
        run one engine turn under the session deadline (tokens stream out as events); without
          tools (tool_choice "none", with a note) once this request's delegation waves are
          spent or the final answer is due
        past the deadline?                            -> one short last turn without tools,
          else an answer composed from the results -> timed_out
        model error (not a refused configuration)?    -> model.retried, gather the inbox (while
          sub-agents work: news, or a bounded backoff) and run the turn again, at most
          ``model_failures_allowed`` times in a row
        model error for good, or the budget spent?    -> wait (bounded) for the sub-agents
          -> failed, with an answer composed from their results and every media URL
        gather the inbox: results, progress, follow-ups; wait (bounded) while sub-agents are
          outstanding and nobody asked anything new
        answered, but nothing delegated for this request? -> a request for a picture that a
          profile makes, or an evasive answer (it declines, disclaims or restates the request),
          is routed: one forced choice of profiles, the chosen one given the request as written
          (lead/routing.py); any other answer is sent back once
          (confirm_direct): the profiles again, delegate or answer the same again
        nothing new and nothing outstanding?          -> the last turn's text, checked
          (lead/outcome.py): completed, or incomplete; a last turn that was cut, blocked,
          silent or a refusal beside delivered results gets one more turn without tools, asked
          for the answer (cut or silent again: composed from the results, completed when every
          sub-agent delivered, else incomplete)
        put what arrived into the context, ack it
    not completed: shutdown to every outstanding sub-agent

So the lead writes its final answer only once every delegated result is in its context, its
model failing does not throw away the sub-agents' work, and nothing runs past the deadline but
the one bounded late answer. Nothing here imports ``subagents``: profiles arrive as plain
``name -> description``. Sends are :class:`~baton.lead.dispatch.Dispatcher`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from functools import partial
from pathlib import Path

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusError, ExitCode
from baton.bus.events import (
    RETRACTED_DEADLINE,
    RETRACTED_SENT_BACK,
    AnswerChecked,
    Event,
    ModelRetried,
    TextDelta,
    TextRetracted,
)
from baton.bus.inbox import InboxReader
from baton.bus.messages import DEFAULT_POOL, ApprovePolicy, Envelope
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
from baton.lead import prompt, routing
from baton.lead.answer import answer_tool
from baton.lead.checkpoint import (
    TAKEN_KEEP,
    CheckpointSink,
    LastTurn,
    LeadCheckpoint,
    Progress,
    restore_roster,
    roster_state,
    turn_messages,
)
from baton.lead.delegation import DelegationLimits, Waves, delegation_rewriter
from baton.lead.dispatch import Dispatcher
from baton.lead.ending import final_outcome, last_turn, late_outcome, reply_of
from baton.lead.intake import Intake
from baton.lead.keeper import LeadTakenOver
from baton.lead.outcome import LeadOutcome as LeadOutcome
from baton.lead.outcome import LeadStatus as LeadStatus
from baton.lead.outcome import check_answer, failure_answer, picture_asked
from baton.lead.prompt import LEAD_NAME
from baton.lead.roster import Roster
from baton.lead.tools import SEND_MESSAGE, SendKind
from baton.llm.types import ChatModel, Message, ToolChoice

log = logging.getLogger(__name__)

LATE_ANSWER_S = 60.0
"""The last turn past the session deadline runs at most this long."""
FAILURE_BACKOFF_S = 2.0
"""After the n-th failed turn in a row the lead waits up to n times this for news, then retries."""
ROUTE_TIMEOUT_S = 120.0
"""The routing request (one constrained call, lead/routing.py) runs at most this long."""


class Lead:
    """The lead of one session; build it, then ``await lead.run(task)`` once.

    ``cancel()`` (from any task of the same event loop) ends the current turn and any inbox wait at
    once; ``run`` then shuts the sub-agents down and returns ``cancelled``.

    ``tool_choice`` goes with every request that offers tools (unless it is ``"none"``, the
    terminal ``answer`` tool, lead/answer.py, is offered too, so the lead can still reply when a
    request requires a call: ``"required"``, or the client's retry after a parse error);
    ``delegation`` caps the sends of one turn and the delegating turns (waves) of one request;
    ``spend`` is the session's shared budget; ``model_failures_allowed`` failed turns in a row are
    retried; ``failure_grace_s`` bounds the wait for the sub-agents once the model has failed for
    good; ``profile_tools`` also offers one delegation tool per profile; ``media_profiles`` are
    the profiles whose tools make media (asked and no media: ``incomplete``); ``late_answer_s``
    bounds the one turn past the session deadline; ``spawn_pool`` is where its spawn requests go
    (``local``: the session's own worker; else a pool of workers); ``spawn_approve`` is the
    session's approval policy, which every spawn request carries to its sub-agent;
    ``checkpoints`` receives the lead's checkpoint at each step and each send
    (lead/checkpoint.py), and :meth:`restore` puts one back before ``run``. ``media_dir`` is the
    media root: a sub-agent's ``file://`` media outside it are dropped (lead/media.py; None: not
    checked, for a lead embedded without one). Reports reach it only from its own agents' owners
    (lead/trust.py).
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
        media_profiles: Collection[str] = frozenset(),
        late_answer_s: float = LATE_ANSWER_S,
        spawn_pool: str = DEFAULT_POOL,
        spawn_approve: ApprovePolicy = "ask",
        checkpoints: CheckpointSink | None = None,
        media_dir: Path | None = None,
    ) -> None:
        self.bus = bus
        self.session = session
        self.roster = Roster(profiles)
        self.timeout_s = timeout_s
        self.shutdown_grace_s = shutdown_grace_s
        self.model_failures_allowed = model_failures_allowed
        self.failure_grace_s = failure_grace_s
        self.failure_backoff_s = failure_backoff_s
        self.media_profiles = frozenset(media_profiles)
        self.late_answer_s = late_answer_s
        self._emit = events
        delegation = delegation or DelegationLimits()
        self.waves = Waves(delegation.max_waves)
        """Turns of this request that delegated; once spent, the lead answers without tools."""
        self.progress = Progress()
        """Where the macro-loop stands (checkpointed with the rest)."""
        self._checkpoints = checkpoints
        self._taken: list[str] = []
        """Ids of the last inbox messages put into the context (for the checkpoint)."""
        self._abandoned: LeadTakenOver | None = None
        telemetry = telemetry or Telemetry()
        self.dispatch = Dispatcher(
            bus,
            session,
            self.roster,
            limits=delegation,
            events=events,
            give_up=self._giving_up,
            refresh=self._refresh,
            pool=spawn_pool,
            approve=spawn_approve,
            on_send=self._save_mid_turn,
            telemetry=telemetry,
        )
        tools = list(tools)
        self._own_tools = frozenset(tool.name for tool in tools)
        registry = ToolRegistry([self.dispatch.send_tool(), *tools])
        self._shown = 0
        """Characters of the lead's reply the current turn has shown (less what it took back)."""
        shown = None if events is None else self._count_shown
        answer = answer_tool(session, shown, registry.names) if tool_choice != "none" else None
        if answer is not None:
            registry.add(answer)
        if profile_tools:
            for made in delegating.profile_tools(profiles, self._delegate, registry.names):
                registry.add(made)
        self.dispatch.tools = registry
        self._profiles = dict(profiles)
        self._answer_tool = answer is not None
        self._confirm_direct = delegation.confirm_direct
        self._routes = tool_choice != "none"
        self._router = partial(
            AgentLoop,
            model,
            session=session,
            agent=LEAD_NAME,
            limits=LoopLimits(soft_max_rounds=1, hard_max_rounds=1),
            events=shown,
            telemetry=telemetry,
            tool_choice="required",
            spend=spend,
        )
        """Makes the routing request's loop over a ``route`` tool (lead/routing.py)."""
        system = prompt.system_prompt(
            profiles,
            instructions,
            answer_tool=answer is not None,
            must_call=tool_choice == "required",
        )
        self.history: list[Message] = [{"role": "system", "content": system}]
        self._engine = AgentLoop(
            model,
            registry,
            session=session,
            agent=LEAD_NAME,
            limits=limits,
            channel=channel,
            events=shown,
            telemetry=telemetry,
            tool_choice=tool_choice,
            call_rewriter=delegation_rewriter(
                self.dispatch.targets, lambda: registry.names, SEND_MESSAGE
            ),
            spend=spend,
        )
        self.intake = Intake(
            InboxReader(bus, session, LEAD_NAME),
            self.roster,
            self.dispatch,
            self.history,
            cancel=self.cancel,
            cancelled=lambda: self._cancelled,
            on_request=self._new_request,
            before_ack=self._save_taken,
            events=events,
            media_dir=media_dir,
        )
        self._cancelled = False

    async def _count_shown(self, event: Event) -> None:
        """The engine's and the answer tool's events, counting the lead's text shown this turn
        (so a reply the lead sends back, or one the deadline cut, can be taken back whole)."""
        if event.agent == LEAD_NAME:
            if isinstance(event, TextDelta):
                self._shown += len(event.text)
            elif isinstance(event, TextRetracted):
                self._shown = max(0, self._shown - event.chars)
        assert self._emit is not None
        await self._emit(event)

    async def _retract_shown(self, why: str) -> None:
        """Take back what the current turn showed of the lead's reply (``text.retracted``)."""
        if self._emit is not None and self._shown:
            chars, self._shown = self._shown, 0
            taken_back = TextRetracted(session=self.session, agent=LEAD_NAME, chars=chars, why=why)
            await self._emit(taken_back)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """End the current turn and any wait now; ``run`` then stops the sub-agents."""
        self._cancelled = True
        self._engine.cancel()
        self.inbox.interrupt()

    def abandon(self, taken_over: LeadTakenOver) -> None:
        """Another lead took the session over: stop now, leave the sub-agents alone (they are
        its successor's), and let ``run`` raise ``taken_over``."""
        self._abandoned = taken_over
        self.cancel()

    async def deliver(self, to: str, content: str, kind: SendKind) -> str | ToolResult:
        """``send_message`` (see :class:`~baton.lead.dispatch.Dispatcher`)."""
        return await self.dispatch.deliver(to, content, kind)

    async def _route_to(self, profile: str) -> str | ToolResult:
        """A ``route`` call: the current request, as the person wrote it, to ``profile``."""
        return await self.dispatch.deliver(profile, self.progress.request, "task")

    async def _delegate(self, profile: str, task: str) -> str | ToolResult:
        """A per-profile delegation tool's call: a task to that profile."""
        return await self.dispatch.deliver(profile, task, "task")

    # -- the macro-loop -------------------------------------------------------------------------

    async def run(self, task: str | None, *, time_left: float | None = None) -> LeadOutcome:
        """Work on ``task`` until answered with nothing outstanding, cancelled, failed or late.

        ``task`` None carries on from the checkpoint put back by :meth:`restore`;
        ``time_left`` (default ``timeout_s``) is how long the session may still run.
        """
        if task is not None:
            self.history.append({"role": "user", "content": task})
            self.progress.request = task
        deadline = anyio.current_time() + (self.timeout_s if time_left is None else time_left)
        try:
            if task is not None:
                await self._save()
            outcome = await self._loop(deadline)
            if self._abandoned is not None:
                raise self._abandoned
            if outcome.status in ("completed", "incomplete", "timed_out"):
                outcome = await self._checked(outcome)
        except anyio.get_cancelled_exc_class():
            if self._abandoned is not None:
                raise
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
            outcome.composed,
        )

    async def _loop(self, deadline: float) -> LeadOutcome:
        """Turn, gather, turn ... in phases (:class:`~baton.lead.checkpoint.Progress`), so a
        resumed lead picks up at the phase its checkpoint says."""
        while True:
            progress = self.progress
            if self._cancelled:
                return LeadOutcome("cancelled", self._last_text())
            if progress.phase == "failed":
                return await self._failed(progress.error, deadline)
            if progress.phase == "gather":
                ended = await self._gather(deadline)
                if ended is not None:
                    return ended
                continue
            result = await self._turn(deadline)
            if result is None:
                return await self._late_answer()
            if result.stop is StopReason.CANCELLED or self._cancelled:
                return LeadOutcome("cancelled", reply_of(result))
            if result.stop is StopReason.ERROR and self._retryable(result, progress.failures):
                progress.failures += 1
                await self._save()
                arrived, late = await self._retry_after(result, progress.failures, deadline)
                ended = await self._take_news(arrived, late, reply_of(result))
                if ended is not None:
                    return ended
            elif result.stop in (StopReason.ERROR, StopReason.BUDGET):
                progress.phase, progress.error = "failed", str(result.error or "model error")
                await self._save()
            else:
                progress.failures = 0
                if await self._sent_back(result, deadline):
                    continue
                progress.phase, progress.last = "gather", await self._last_turn(result)
                await self._save()

    async def _sent_back(self, result: TurnResult, deadline: float) -> bool:
        """Send a request's answer that delegated nothing back once (``confirm_direct``), unless
        the lead used a tool of its own, was asked without tools, or has sub-agents from an
        earlier request (their work or results are in its context: a follow-up answered then
        stands, and "delegate now" would only start a second painter): the
        profiles again, and the choice to delegate or to answer the same again. Small models
        answer work they cannot do with an apology or a made-up picture ("The fox is available
        at [url]"); asked once more with the profiles in view, they delegate, while a plain
        question costs one more call and is answered again. What the reply showed is taken back
        (``text.retracted``), so a confirmed answer is not shown twice. A request for a picture,
        or an answer that evades the request, is routed instead (:meth:`_routed`), once."""
        progress = self.progress
        if (
            not self._confirm_direct
            or self.waves.spent
            or self.roster.agents
            or self._used_own_tools(result)
            or not self._profiles
            or self._cancelled
        ):
            return False
        if not progress.routed and (
            self._picture_asked() or routing.evades_work(reply_of(result), progress.request)
        ):
            return await self._routed(deadline)
        if progress.direct_checked or not self._answer_tool:
            return False
        progress.direct_checked = True
        await self._retract_shown(RETRACTED_SENT_BACK)
        note = prompt.direct_note(self._profiles, answer_tool=self._answer_tool)
        self._add_note(note, kind="check")
        await self._save()
        return True

    def _picture_asked(self) -> bool:
        """Whether the request asks for a picture (lead/outcome.py ``asks_for_media``) that a
        profile on offer can make: answered without delegating, it is routed at once, whatever
        the answer says (a 1.5B lead answered "get me a picture of a balloon" with "I can't
        fully answer your question without delegating the part that requires painting")."""
        return picture_asked(self.progress.request, self.media_profiles, self._profiles)

    async def _routed(self, deadline: float) -> bool:
        """Route the request the lead evaded (lead/routing.py): one request offering only
        ``route(to)``, a profile enum, with a call required; each chosen profile gets the request
        as written. What it sent goes into the context as the ``send_message`` calls they were
        (the route tool is not the lead's), and the lead waits for the results. Nothing sent
        (the call failed, or was refused): the answer stands, as it would have."""
        progress = self.progress
        if not self._routes or not progress.request.strip():
            return False
        progress.routed = True
        await self._retract_shown(RETRACTED_SENT_BACK)
        choices = self._route_choices()
        self.dispatch.sends.reset()
        self.dispatch.turn_sends.clear()
        if len(choices) == 1:  # one profile can do it: no model call to choose
            try:
                await self._route_to(next(iter(choices)))
            except BusError as exc:  # as a tool's error would be: nothing sent, the answer stands
                log.warning("session %s: could not route the request: %s", self.session, exc)
        else:
            asked = [*self.history, prompt.note_block("check", routing.ROUTE_NOTE)]
            router = self._router(ToolRegistry([routing.route_tool(choices, self._route_to)]))
            with anyio.move_on_after(min(ROUTE_TIMEOUT_S, deadline - anyio.current_time())):
                await router.run_turn(asked)
        sends = list(self.dispatch.turn_sends)
        self.dispatch.turn_sends.clear()
        self.waves.count(len(sends))
        if not sends:
            log.info("session %s: routing the request sent nothing", self.session)
            await self._save()
            return False
        self.history.extend(turn_messages(sends))
        progress.phase, progress.last = "gather", LastTurn()
        await self._save()
        return True

    def _route_choices(self) -> dict[str, str]:
        """The profiles a routed request may go to: for a request for a picture only those
        that make media (a 1.5B router sent "paint a lighthouse" to the helper), else all."""
        if self._picture_asked():
            return {p: d for p, d in self._profiles.items() if p in self.media_profiles}
        return dict(self._profiles)

    async def _last_turn(self, result: TurnResult) -> LastTurn:
        """What the final answer needs of this turn. A reply that refuses the work while
        sub-agents delivered results is no answer (lead/routing.py ``refuses``): it is taken back
        and the answer asked for (without tools); refused again, the answer is composed from the
        results (lead/ending.py ``final_outcome``), never a refusal beside the pictures."""
        last = last_turn(result)
        if last.reply and self.roster.delivered and routing.refuses(last.reply):
            log.info("session %s: the lead refused with the results in; asking again", self.session)
            await self._retract_shown(RETRACTED_SENT_BACK)
            return LastTurn(reply="", wants_final=True)
        return last

    def _used_own_tools(self, result: TurnResult) -> bool:
        """Whether the turn called one of the lead's own tools (it worked on the request itself,
        so there is nothing to send back)."""
        for message in result.messages:
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and function.get("name") in self._own_tools:
                    return True
        return False

    async def _gather(self, deadline: float) -> LeadOutcome | None:
        """Wait for news while sub-agents work; with none and nothing outstanding, the last
        turn's reply is the answer (or the answer is asked for once more, without tools)."""
        progress = self.progress
        arrived, late = await self.intake.gather(deadline)
        if not arrived and not late and not self._cancelled:
            if progress.final_asked or not progress.last.wants_final:
                return final_outcome(progress.last, self.roster, progress.final_asked)
            progress.final_asked = True  # one more turn, asked for the answer without tools
            self._add_note(prompt.FINAL_NOTE, final=True)
        progress.phase = "turn"
        if not arrived:
            await self._save()
        return await self._take_news(arrived, late, progress.last.reply)

    async def _take_news(
        self, arrived: list[Envelope], late: bool, reply: str
    ) -> LeadOutcome | None:
        """Put what arrived into the context (checkpointed before it is acked); the outcome if
        the lead was cancelled meanwhile or the deadline passed."""
        if arrived:
            self.progress.final_asked = False
        await self.intake.take(arrived)
        if self._cancelled:
            return LeadOutcome("cancelled", reply)
        if late:
            return await self._late_answer()
        return None

    def _retryable(self, result: TurnResult, failures: int) -> bool:
        """A failed turn is tried again unless it failed too often or its configuration was
        refused (a wrong key, model or endpoint fails the same way every time)."""
        error = result.error
        refused = error is not None and error.exit_code == ExitCode.USAGE
        return not refused and failures < self.model_failures_allowed

    async def _retry_after(
        self, result: TurnResult, failures: int, deadline: float
    ) -> tuple[list[Envelope], bool]:
        """Say that the failed turn will be tried again (a ``model.retried`` of the lead, so the
        views do not take its error for the end), then gather news before the retry."""
        allowed = self.model_failures_allowed
        log.warning("session %s: lead turn failed (%d of %d allowed): %s",
                    self.session, failures, allowed, result.error)  # fmt: skip
        backoff = self.failure_backoff_s * failures if self.roster.outstanding else 0.0
        if self._emit is not None:
            reason = f"lead turn failed ({failures} of {allowed} allowed): {result.error}"
            await self._emit(
                ModelRetried(
                    session=self.session,
                    agent=LEAD_NAME,
                    attempt=failures,
                    reason=reason,
                    delay_s=backoff,
                )
            )
        return await self.intake.gather_news(deadline, backoff)

    def _add_note(self, text: str, *, final: bool = False, kind: str = "note") -> None:
        """A note from the session in the context; ``final``: the next turns go without tools
        until one answers."""
        self.history.append(prompt.note_block(kind, text))
        self.progress.final_due = self.progress.final_due or final

    async def _turn(self, deadline: float) -> TurnResult | None:
        """One engine turn under the session deadline (None: the deadline cut it).

        It is asked without tools (``tool_choice="none"``) once the delegation waves of this
        request are spent (with a note saying so, once) or the final answer is due.
        """
        if self.waves.exhausted and not self.progress.waves_noted:
            self.progress.waves_noted = True
            self._add_note(prompt.waves_note(self.roster.media_urls, self.roster.outstanding))
        self.dispatch.sends.reset()
        self.dispatch.turn_sends.clear()
        none = self.progress.final_due or self.waves.exhausted
        self._shown = 0
        result: TurnResult | None = None
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            if none:
                result = await self._engine.run_turn(self.history, tool_choice="none")
            else:
                result = await self._engine.run_turn(self.history)
        self.waves.count(self.dispatch.sends.sends)
        if result is None:
            log.warning("session %s: the lead's turn was cut by the session deadline", self.session)
            await self._retract_shown(RETRACTED_DEADLINE)  # the late answer streams anew
        elif result.stop not in (StopReason.ERROR, StopReason.BUDGET):
            self.progress.final_due = False
        self.dispatch.turn_sends.clear()
        return result

    async def _late_answer(self) -> LeadOutcome:
        """Past the session deadline: one short last turn without tools (``late_answer_s``),
        told what is missing; no answer from it, one composed from the results."""
        if not self._cancelled:  # what arrived while the cut turn ran (one read, no wait)
            await self.intake.take(await self.intake.collect(anyio.current_time(), lambda _: True))
        missing = ", ".join(self.roster.outstanding)
        waiting = f"; still no result from: {missing}" if missing else ""
        self._add_note(
            f"The session timed out after {self.timeout_s:g} s{waiting}. Do not delegate again: "
            "answer the user now with what you have, citing every media URL exactly.",
            final=True,
            kind="error",
        )
        result = await self._turn(anyio.current_time() + self.late_answer_s)
        return late_outcome(result, self.roster, self.timeout_s)

    async def _failed(self, error: str, deadline: float) -> LeadOutcome:
        """The model failed for good (or the budget is spent): the sub-agents' work still counts,
        so wait (bounded) for what is outstanding and answer with what they reported."""
        log.warning("session %s: the lead's model failed for good: %s", self.session, error)
        if self.roster.outstanding and not self._cancelled:
            until = min(deadline, anyio.current_time() + self.failure_grace_s)
            arrived = await self.intake.collect(until, lambda _: not self.roster.outstanding)
            await self.intake.take(arrived)
        if self._cancelled:
            return LeadOutcome("cancelled", failure_answer(error, self.roster), error=error)
        return LeadOutcome("failed", failure_answer(error, self.roster), error=error)

    async def _checked(self, outcome: LeadOutcome) -> LeadOutcome:
        """The final answer against what the tools produced (lead/outcome.py), and the event."""
        check = check_answer(
            outcome.answer,
            self.roster,
            self.history,
            media_profiles=self.media_profiles,
            request=self.progress.request,
        )
        if self._emit is not None:
            await self._emit(
                AnswerChecked(
                    session=self.session,
                    agent=LEAD_NAME,
                    missing_media=check.missing_media,
                    invented_urls=check.invented_urls,
                    composed=outcome.composed,
                )
            )
        status, error = outcome.status, outcome.error
        if status == "completed" and check.incomplete:
            status, error = "incomplete", check.incomplete
        return LeadOutcome(status, check.answer, [], error, check.invented_urls, outcome.composed)

    def _last_text(self) -> str:
        for message in reversed(self.history):
            if message.get("role") == "assistant" and isinstance(message.get("content"), str):
                return str(message.get("content"))
        return ""

    # -- the inbox (lead/intake.py) ---------------------------------------------------------

    @property
    def inbox(self) -> InboxReader:
        """The lead's inbox, read the way every agent reads its own (through bus blips too)."""
        return self.intake.inbox

    async def _refresh(self) -> None:
        await self.intake.refresh()

    def _new_request(self, request: str) -> None:
        """A person asked something new (``request``): delegation for it starts over."""
        self.dispatch.new_request()
        self.waves.reset()
        self.progress.waves_noted = False
        self.progress.direct_checked = False
        self.progress.routed = False
        self.progress.request = request

    # -- the checkpoint (lead/checkpoint.py) ----------------------------------------------------

    def checkpoint(self, *, mid_turn: bool = False) -> LeadCheckpoint:
        """Everything of the lead but its conversation, as it stands now."""
        agents, successors = roster_state(self.roster)
        return LeadCheckpoint(
            agents=agents,
            successors=successors,
            tasks=self.dispatch.tasks,
            waves_spent=self.waves.spent,
            progress=self.progress.model_copy(deep=True),
            taken=list(self._taken),
            mid_turn=mid_turn,
            turn_sends=list(self.dispatch.turn_sends) if mid_turn else [],
        )

    def restore(self, history: list[Message], checkpoint: LeadCheckpoint) -> None:
        """Put a checkpoint back (before ``run(None)``): the conversation, the roster and where
        the loop stood. A turn cut off after it delegated is not run again: its sends go into the
        context as the calls they were, and the lead waits for their results."""
        self.history[:] = history
        restore_roster(self.roster, checkpoint)
        self.dispatch.restore(checkpoint.tasks)
        self.waves.spent = checkpoint.waves_spent
        self.progress = checkpoint.progress.model_copy(deep=True)
        self._taken = list(checkpoint.taken)
        self.inbox.remember(checkpoint.taken)
        if checkpoint.mid_turn and checkpoint.turn_sends:
            self.history.extend(turn_messages(checkpoint.turn_sends))
            self.waves.count(len(checkpoint.turn_sends))
            self.progress.phase, self.progress.last = "gather", LastTurn()
            self.progress.final_due = False
        self.dispatch.roster_changed()

    async def _save(self) -> None:
        """A checkpoint at a step: the whole conversation and the rest."""
        if self._checkpoints is not None:
            await self._checkpoints.save(self.checkpoint(), self.history)

    async def _save_mid_turn(self) -> None:
        """A checkpoint during a turn (a send): the rest, with the turn's sends so far. It runs
        inside a tool call, whose errors the engine hands to the model: a lead taken over stops
        here instead (``run`` raises it)."""
        if self._checkpoints is None:
            return
        try:
            await self._checkpoints.save(self.checkpoint(mid_turn=True), None)
        except LeadTakenOver as exc:
            self.abandon(exc)

    async def _save_taken(self, ids: list[str]) -> None:
        """Inbox news went into the context and is about to be acked: checkpoint it first."""
        self._taken = [*self._taken, *ids][-TAKEN_KEEP:]
        await self._save()

    async def stop_agents(self) -> None:
        """``shutdown`` to every outstanding sub-agent, then wait (bounded) for their results."""
        await self.intake.stop_agents(self.shutdown_grace_s)

    def _giving_up(self) -> bool:
        """Asked by the retry policy after each failure: a cancelled lead stops retrying."""
        return self._cancelled

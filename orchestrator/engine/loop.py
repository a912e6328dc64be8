"""The agent loop: call the model, run the tools it asked for under governance, repeat.

:class:`AgentLoop` runs one *turn* at a time (a user message, or a sub-agent's inbox batch) as a
short ``while`` over small typed steps::

    while True:
        cancelled?                        -> stop (cancelled)
        fit the history to the budget
        reply = the model step (budget, streamed text, retries, cut replies, calls written as text)
        model error / budget / cut twice? -> stop (error / budget / truncated)
        no tool calls?                    -> stop (answered)
        run the round (verdict, interceptor chain, tools), append the results
        terminal call / hard stop?        -> stop (terminal / hard_stop)
        a tool said news is waiting?      -> stop (news)
        2 rounds of only refused calls?   -> stop (blocked)

The model step is :class:`~baton.engine.model_step.ModelStep`; what observers see of the streamed
text is :class:`~baton.engine.visible.VisibleText`.

The caller owns the message list: the loop appends to it (and compresses it when over budget), so a
sub-agent can checkpoint it after the turn. ``cancel()`` from any task of the same event loop ends
the turn promptly — mid-model-call, mid-tool or mid-dialog — releases every pending human wait, and
leaves no task behind; the history is left valid (every tool call answered).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from baton.bus.events import (
    Event,
    GuardFired,
    RoundEnded,
    RoundStarted,
    ToolCalled,
    ToolCallInfo,
    ToolResulted,
    ToolResultInfo,
)
from baton.engine import budget as budgeting
from baton.engine import messages as texts
from baton.engine.calls import RoundContext
from baton.engine.errors import TurnInProgress
from baton.engine.history import assistant_message, newest_user_index, tool_message
from baton.engine.loop_options import DEFAULT_OPTIONS, NO_PARTS, LoopOptions, LoopParts
from baton.engine.model_step import ModelStep
from baton.engine.reply_calls import CallRewriter, ReplyCalls
from baton.engine.round import RoundOutcome, run_round
from baton.engine.step_report import StepReport
from baton.engine.stops import StopReason
from baton.engine.telemetry import Telemetry
from baton.engine.tools import Tool, ToolRegistry
from baton.engine.turn import AgentTurn, LoopLimits, Verdict
from baton.llm.errors import ModelError
from baton.llm.types import ChatModel, Message, TextSink, ToolCall, ToolChoice, Usage

log = logging.getLogger(__name__)

BLOCKED_ROUNDS_LIMIT = 2
"""Consecutive rounds of only refused calls after which the turn ends (StopReason.BLOCKED)."""

__all__ = [
    "BLOCKED_ROUNDS_LIMIT",
    "UNSET",
    "AgentLoop",
    "CallRewriter",
    "LoopOptions",
    "LoopParts",
    "StopReason",
    "TurnResult",
]


class _Unset(Enum):
    """The type of :data:`UNSET` (an enum member, so type checkers can narrow it away)."""

    UNSET = "unset"


UNSET: Final = _Unset.UNSET
"""``run_turn(tool_choice=UNSET)``: the loop's own ``tool_choice`` (None is a real choice: send
none)."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The public result of one turn."""

    text: str
    """The model's last text (its answer when ``stop`` is ``answered``)."""
    media_urls: tuple[str, ...]
    """Every media URL the tools produced this turn, in order, without duplicates."""
    stop: StopReason
    terminal_call: ToolCall | None
    messages: list[Message]
    """The caller's history list, updated in place."""
    rounds: int
    """Tool rounds this turn ran."""
    usage: Usage | None = None
    """Usage of the last model reply, when the server sent it."""
    error: ModelError | None = None
    retries: int = 0
    """Model requests the client retried this turn (each one a ``model.retried`` event)."""
    finish_reason: str | None = None
    """The finish reason of the last model reply (``length`` when it was cut)."""
    tool_errors: tuple[str, ...] = ()
    """What the tools that failed this turn said (they raised or ran past their timeout), one
    per tool whose last call failed: a tool called again successfully is no longer failing."""


@dataclass(slots=True)
class _TurnState:
    """The running totals of one turn (private to the loop)."""

    turn: AgentTurn
    ctx: RoundContext
    keep_from: int
    text: str = ""
    media: list[str] = field(default_factory=list)
    open_calls: tuple[ToolCall, ...] = ()
    """Calls of the last assistant message not yet answered in the history."""
    usage: Usage | None = None
    terminal_call: ToolCall | None = None
    retries: int = 0
    finish_reason: str | None = None
    blocked_rounds: int = 0
    """Consecutive rounds in which every call was blocked."""
    failing: dict[str, str] = field(default_factory=dict)
    """Tool name -> what its last call said, when that call failed."""


class AgentLoop:
    """Runs turns of one agent: a model, its tools, its limits, a channel to a human.

    Example::

        loop = AgentLoop(model, [search, tool(needs_approval=True)(delete_file)],
                         session="s1", agent="lead",
                         parts=LoopParts(channel=MemoryChannel(), events=sink))
        history = [{"role": "system", "content": "..."}, {"role": "user", "content": "hi"}]
        result = await loop.run_turn(history, on_text=print_delta)
        result.text, result.media_urls, result.stop, result.messages

    One turn at a time per loop; run several loops for several agents.

    ``options`` are its settings (:class:`~baton.engine.loop_options.LoopOptions`: limits, tool
    choice, token budget, trace), ``parts`` its live parts
    (:class:`~baton.engine.loop_options.LoopParts`: events, channel, telemetry, the session's
    spend, the call rewriter — the lead maps a profile name used as a tool to ``send_message`` —
    and the image resolver). Tools are read from the registry per request, so
    :meth:`ToolRegistry.replace` takes effect from the next one.
    """

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry | Iterable[Tool] = (),
        *,
        session: str,
        agent: str,
        options: LoopOptions = DEFAULT_OPTIONS,
        parts: LoopParts = NO_PARTS,
    ) -> None:
        self.model = model
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.session = session
        self.agent = agent
        self.limits = options.limits or LoopLimits()
        self.channel = parts.channel
        self.events = parts.events
        self.telemetry = parts.telemetry or Telemetry()
        self.token_budget = options.token_budget
        self.image_resolver = parts.image_resolver
        self.tool_choice = options.tool_choice
        self.call_rewriter = parts.call_rewriter
        self.spend = parts.spend
        self.trace = options.trace
        """The trace context its turns continue (what woke a sub-agent); when None, its first
        turn's own, so every later turn of a long-lived loop (the lead's) stays in one trace."""
        self._turn: AgentTurn | None = None
        self._running = False

    # -- lifecycle ------------------------------------------------------------------------------

    def new_turn(self) -> AgentTurn:
        """Create the next turn up front, so it can be cancelled before ``run_turn`` starts it."""
        turn = AgentTurn(self.limits, on_cancel=self._release_waits)
        self._turn = turn
        return turn

    def cancel(self) -> None:
        """End the current (or next prepared) turn promptly; safe to call from any task."""
        if self._turn is not None:
            self._turn.cancel()

    def _release_waits(self) -> None:
        if self.channel is not None:
            self.channel.cancel_pending()

    async def _emit(self, event: Event) -> None:
        if self.events is not None:
            await self.events(event)

    # -- one turn -------------------------------------------------------------------------------

    async def run_turn(
        self,
        messages: list[Message],
        *,
        on_text: TextSink | None = None,
        turn: AgentTurn | None = None,
        tool_choice: ToolChoice | _Unset | None = UNSET,
    ) -> TurnResult:
        """Run the loop until the model answers or a stop condition; see :class:`StopReason`.

        ``messages`` must end with the new user message(s); it is updated in place. Model errors
        end the turn with ``stop=error`` (and an ``ErrorEvent``); cancellation from outside the
        loop (the caller's own scope) propagates as usual. ``tool_choice`` overrides the loop's
        for this turn only (the lead runs its wrap-up turns with ``"none"``: no calls, and no
        calls read from the text either); left out, the loop's own applies.
        """
        if self._running:
            raise TurnInProgress(f"agent {self.agent!r} is already running a turn")
        turn = turn or (self._turn if self._turn is not None and self._turn.rounds == 0 else None)
        turn = turn or self.new_turn()
        self._turn = turn
        self._running = True
        ctx = RoundContext(
            session=self.session,
            agent=self.agent,
            turn=turn,
            tools=self.tools,
            telemetry=self.telemetry,
            channel=self.channel,
            sink=self.events,
            image_resolver=self.image_resolver,
        )
        state = _TurnState(turn, ctx, keep_from=newest_user_index(messages))
        stop = StopReason.CANCELLED
        error: ModelError | None = None
        try:
            with self.telemetry.agent_span(
                self.agent, self.model.model, self.session, parent=self.trace
            ) as span:
                self.trace = self.trace or span.trace()
                with turn.scope:
                    choice = self.tool_choice if tool_choice is UNSET else tool_choice
                    stop, error = await self._run(messages, state, on_text, choice)
                span.set("baton.stop_reason", str(stop))
        finally:  # whatever ended the turn (even an outer cancel), every call gets its answer
            unanswered = _answer_open_calls(messages, state)
            self._running = False
            if self._turn is turn:
                self._turn = None
        if turn.scope.cancelled_caught:
            stop = StopReason.CANCELLED
        if stop is StopReason.CANCELLED:
            await self._report_cancelled(unanswered, turn.rounds)
        return TurnResult(
            text=state.text,
            media_urls=tuple(dict.fromkeys(state.media)),
            stop=stop,
            terminal_call=state.terminal_call if stop is StopReason.TERMINAL else None,
            messages=messages,
            rounds=turn.rounds,
            usage=state.usage,
            error=error,
            retries=state.retries,
            finish_reason=state.finish_reason,
            tool_errors=tuple(state.failing.values()),
        )

    async def _run(
        self,
        history: list[Message],
        state: _TurnState,
        on_text: TextSink | None,
        tool_choice: ToolChoice | None,
    ) -> tuple[StopReason, ModelError | None]:
        """The loop itself: a short while over the steps below."""
        fixed_chars = budgeting.tools_chars(self.tools.schemas) if self.token_budget else 0
        label = f"{self.session}/{self.agent}"
        step = ModelStep(
            self.model,
            ReplyCalls(self.tools, tool_choice, self.call_rewriter, label=label),
            StepReport(
                self.session, self.agent, self._emit, self.telemetry, self.model.model, self.spend
            ),
            soft_max_rounds=state.turn.limits.soft_max_rounds,
        )
        turn = state.turn
        while True:
            if turn.cancelled:
                return StopReason.CANCELLED, None
            round_no = turn.rounds + 1
            await self._emit(RoundStarted(session=self.session, agent=self.agent, round=round_no))
            self._fit_budget(history, state, fixed_chars)
            asked = await step.ask(history, round_no, on_text)
            state.retries += asked.retries
            reply = asked.reply
            if reply is None:
                return asked.stop or StopReason.ERROR, asked.error
            state.text, state.usage = reply.text, reply.usage or state.usage
            state.finish_reason = reply.finish_reason
            history.append(assistant_message(reply))
            if not reply.tool_calls:
                await self._emit(RoundEnded(session=self.session, agent=self.agent, round=round_no))
                return asked.stop or StopReason.ANSWERED, None
            state.open_calls = reply.tool_calls
            outcome = await self._tool_round(reply.tool_calls, state)
            history.extend(tool_message(c.id, a.content) for c, a in outcome.results)
            state.open_calls = ()
            history.extend(outcome.followups)
            await self._round_ended(round_no, outcome)
            if outcome.terminal_call is not None:
                state.terminal_call = outcome.terminal_call
                return StopReason.TERMINAL, None
            if outcome.verdict is Verdict.HARD_STOP:
                return StopReason.HARD_STOP, None
            if outcome.news:
                return StopReason.NEWS, None
            if outcome.verdict is Verdict.CANCELLED:
                return StopReason.CANCELLED, None
            if await self._blocked_rounds(outcome, state):
                return StopReason.BLOCKED, None

    # -- steps ----------------------------------------------------------------------------------

    async def _blocked_rounds(self, outcome: RoundOutcome, state: _TurnState) -> bool:
        """Count rounds in which governance refused every call; True when the turn must end."""
        if outcome.results and all(answer.blocked for _, answer in outcome.results):
            state.blocked_rounds += 1
        else:
            state.blocked_rounds = 0
        if state.blocked_rounds < BLOCKED_ROUNDS_LIMIT:
            return False
        self.telemetry.loop_outcome("blocked-rounds")
        await self._emit(
            GuardFired(session=self.session, agent=self.agent, outcome="blocked-rounds")
        )
        return True

    def _fit_budget(self, history: list[Message], state: _TurnState, fixed_chars: int) -> None:
        if self.token_budget is None:
            return
        report = budgeting.fit(history, state.keep_from, self.token_budget, fixed_chars)
        if report is not None:
            state.keep_from = report.keep_from
            log.info(
                "compressed the history of %s/%s: %d tool bodies and %d messages dropped, "
                "%d -> %d chars",
                self.session,
                self.agent,
                report.bodies_dropped,
                report.messages_dropped,
                report.chars_before,
                report.chars_after,
            )

    async def _tool_round(self, calls: tuple[ToolCall, ...], state: _TurnState) -> RoundOutcome:
        for call in calls:
            await self._emit(
                ToolCalled(session=self.session, agent=self.agent, call=_call_info(call))
            )
        state.ctx.media_seen = state.media
        outcome = await run_round(calls, state.ctx)
        state.media.extend(outcome.media_urls)
        for call, answer in outcome.results:
            if answer.synthetic:  # governance answered: the tool itself neither failed nor ran
                continue
            if answer.is_error:
                state.failing[call.name] = answer.content
            else:
                state.failing.pop(call.name, None)
        return outcome

    async def _round_ended(self, round_no: int, outcome: RoundOutcome) -> None:
        results = [
            ToolResultInfo(
                call_id=call.id,
                name=call.name,
                content=answer.content,
                is_error=answer.is_error,
                synthetic=answer.synthetic,
            )
            for call, answer in outcome.results
        ]
        for result in results:
            await self._emit(ToolResulted(session=self.session, agent=self.agent, result=result))
        await self._emit(
            RoundEnded(
                session=self.session,
                agent=self.agent,
                round=round_no,
                tool_calls=[_call_info(call) for call, _ in outcome.results],
                results=results,
            )
        )

    async def _report_cancelled(self, open_calls: tuple[ToolCall, ...], round_no: int) -> None:
        """Count the cancelled turn and show observers how its open calls were answered."""
        self.telemetry.loop_outcome("cancelled")
        if open_calls:
            results = [
                ToolResultInfo(
                    call_id=call.id,
                    name=call.name,
                    content=texts.cancelled(call.name),
                    synthetic=True,
                )
                for call in open_calls
            ]
            await self._emit(
                RoundEnded(
                    session=self.session,
                    agent=self.agent,
                    round=round_no,
                    tool_calls=[_call_info(call) for call in open_calls],
                    results=results,
                )
            )


def _answer_open_calls(history: list[Message], state: _TurnState) -> tuple[ToolCall, ...]:
    """Answer the calls of an interrupted round as cancelled, so the history stays valid for the
    next request (every assistant tool call must be followed by its tool message)."""
    open_calls, state.open_calls = state.open_calls, ()
    history.extend(tool_message(call.id, texts.cancelled(call.name)) for call in open_calls)
    return open_calls


def _call_info(call: ToolCall) -> ToolCallInfo:
    return ToolCallInfo(call_id=call.id, name=call.name, arguments=call.arguments)

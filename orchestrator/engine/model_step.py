"""One model step of a turn: from the history to a reply the loop can act on.

Everything between "ask the model" and "here are the calls to run" lives here, so the loop stays a
short while over steps:

- the session budget is asked before every request, the client's retries included (a refusal ends
  the turn before that request is made) and told the usage after the reply (a ``budget.updated``
  event); the usage itself is logged whether or not there is a budget (``model.usage``);
- the client's retries become ``model.retried`` events, and text a failed attempt showed is taken
  back (``text.retracted``) before the retry streams anew (see :mod:`baton.engine.visible`);
- a reply cut at the output limit (``finish_reason == "length"``) or stopped as a runaway is not an
  answer: its text is taken back and the model is asked once more, with a note asking for a much
  shorter reply; cut again, the turn ends as truncated with the text it got. A reply whose tail is
  a long run of blank lines after text is the exception: it ended where the run began (a small
  model that did not sample its end-of-turn token), and is taken as it stood there;
- a reply with no native calls, when tools were offered, is parsed for calls written as text
  (:mod:`baton.engine.textcalls`), and every call passes the call rewriter before the round.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from baton.bus.events import BudgetUpdated, ErrorEvent, GuardFired, ModelRetried, ModelUsage
from baton.engine import budget as budgeting
from baton.engine import messages as texts
from baton.engine.calls import EventSink
from baton.engine.spend import Spend
from baton.engine.stops import StopReason
from baton.engine.telemetry import Telemetry
from baton.engine.textcalls import parse_text_calls
from baton.engine.tools import ToolRegistry
from baton.engine.turn import fingerprint
from baton.engine.visible import RunawayText, VisibleText
from baton.errors import BudgetExhausted, ModelError
from baton.llm.types import (
    ChatModel,
    Message,
    ModelReply,
    RetryNotice,
    TextSink,
    ToolCall,
    ToolChoice,
    Usage,
)

log = logging.getLogger(__name__)

CallRewriter = Callable[[ToolCall], ToolCall | None]
"""Maps a call the model made to the call to run (None: keep it as it is)."""

CHARS_PER_TOKEN = 4
"""For the usage of a request cut short (a runaway): the server's own count never came."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What one model step produced."""

    reply: ModelReply | None
    """The reply to act on (for ``truncated``, the cut text without calls); None on a stop."""
    stop: StopReason | None = None
    """Set when the turn must end: ``error``, ``budget`` or ``truncated``."""
    error: ModelError | None = None
    retries: int = 0


class ModelStep:
    """Asks the model for one reply of one agent's turn; see the module docstring."""

    __slots__ = (
        "_agent",
        "_emit",
        "_model",
        "_session",
        "_telemetry",
        "call_rewriter",
        "soft_max_rounds",
        "spend",
        "tool_choice",
        "tools",
    )

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry,
        *,
        session: str,
        agent: str,
        emit: EventSink,
        telemetry: Telemetry,
        tool_choice: ToolChoice | None = None,
        call_rewriter: CallRewriter | None = None,
        spend: Spend | None = None,
        soft_max_rounds: int | None = None,
    ) -> None:
        self._model = model
        self.soft_max_rounds = soft_max_rounds
        self.tools = tools
        self._session = session
        self._agent = agent
        self._emit = emit
        self._telemetry = telemetry
        self.tool_choice = tool_choice
        self.call_rewriter = call_rewriter
        self.spend = spend

    async def ask(self, history: list[Message], round_no: int, on_text: TextSink | None) -> Asked:
        """One reply, asked once more when it was cut; never raises a ``ModelError``."""
        schemas = self.tools.schemas
        tool_choice = self._tool_choice(round_no)
        shows = self.tools.shown_arguments
        visible = VisibleText(self._session, self._agent, self._emit, on_text, shows)
        on_call_delta = visible.call_delta if schemas else None
        retries = 0

        async def on_retry(notice: RetryNotice) -> None:
            # Every request counts against the budget, a retry too: a refusal raised here leaves
            # the client unretried (before its wait) and ends the step as ``budget``.
            if self.spend is not None:
                await self.spend.reserve(self._agent)
            nonlocal retries
            retries += 1
            await self._emit(
                ModelRetried(
                    session=self._session,
                    agent=self._agent,
                    attempt=notice.attempt,
                    reason=notice.reason,
                    delay_s=notice.delay_s,
                    model=self._model.model,
                )
            )

        request: Sequence[Message] = history
        for second_try in (False, True):
            refused = await self._reserve(round_no)
            if refused is not None:
                return Asked(None, StopReason.BUDGET, refused, retries)
            cut: Literal["length", "runaway"]
            try:
                with self._telemetry.chat_span(self._model.model) as span:
                    reply = await self._model.complete(
                        request,
                        schemas,
                        on_text=visible.feed,
                        tool_choice=tool_choice,
                        on_retry=on_retry,
                        on_retract=visible.retract,
                        on_call_delta=on_call_delta,
                    )
                    self._telemetry.model_usage(span, self._model.model, reply.usage)
            except RunawayText as exc:
                usage = estimated_usage(request, exc.text)
                await self._record(usage, estimated=True)
                ended = await self._ended(exc, usage, visible)
                if ended is not None:
                    return Asked(ended, retries=retries)
                reply, cut = ModelReply(exc.text, (), "length", usage), "runaway"
            except BudgetExhausted as exc:  # a retry the budget refused (see on_retry)
                await visible.retract()
                await self._refused(exc, round_no)
                return Asked(None, StopReason.BUDGET, exc, retries)
            except ModelError as exc:
                await visible.retract()
                await self._failed(exc, round_no)
                return Asked(None, StopReason.ERROR, exc, retries)
            else:
                await self._record(reply.usage)
                if reply.finish_reason != "length":
                    return Asked(await self._settle(reply, visible), retries=retries)
                cut = "length"
            if second_try:
                await visible.finish(drop_held=False)
                cut_reply = dataclasses.replace(
                    reply,
                    text=reply.text or visible.arguments_text,  # an answer call cut mid-way
                    tool_calls=(),
                    finish_reason="length",
                )
                return Asked(cut_reply, StopReason.TRUNCATED, None, retries)
            await self._cut(cut, reply.text, visible)
            note = texts.reply_cut(len(reply.text), runaway=cut == "runaway")
            request = [*history, {"role": "user", "content": note}]
        raise AssertionError("unreachable: the second try always returns")

    def _tool_choice(self, round_no: int) -> ToolChoice | None:
        """The tool_choice of a request whose calls would form round ``round_no``.

        Past the soft limit the round's calls are refused (wrap-up) unless terminal, so
        ``"required"`` would demand a call that cannot run: an agent with no terminal tool is asked
        ``"auto"`` there, free to answer; one with a terminal tool (a sub-agent's result) keeps
        ``"required"``, as that call still runs.
        """
        choice = self.tool_choice
        if (
            choice == "required"
            and self.soft_max_rounds is not None
            and round_no > self.soft_max_rounds
            and not self.tools.terminal_names
        ):
            return "auto"
        return choice

    # -- the reply ------------------------------------------------------------------------------

    async def _settle(self, reply: ModelReply, visible: VisibleText) -> ModelReply:
        """The reply with its final calls: native ones rewritten, or calls read from its text."""
        if reply.tool_calls:
            await visible.finish(drop_held=True)
            await visible.finish_calls(reply.tool_calls)
            return self._rewritten(reply)
        found = None
        if self.tools and self.tool_choice != "none":
            found = parse_text_calls(reply.text, self._resolve)
        if found is None:
            await visible.finish(drop_held=False)
            return reply
        await visible.keep_only(found.rest)
        await visible.finish_calls(found.calls)
        log.info(
            "%s/%s wrote %d tool call(s) as text: %s",
            self._session,
            self._agent,
            len(found.calls),
            ", ".join(call.name for call in found.calls),
        )
        return dataclasses.replace(reply, text=found.rest, tool_calls=found.calls)

    async def _ended(
        self, runaway: RunawayText, usage: Usage, visible: VisibleText
    ) -> ModelReply | None:
        """The reply a runaway ended (None: it is cut): text shown as prose, or calls written as
        text, then nothing but line breaks; or calls, then the same calls again (each is run
        once: :meth:`_looped_calls`)."""
        looped = self._looped_calls(runaway, visible)
        if looped:
            log.info("%s/%s: reply looped after %d call(s) (%s); each is run once",
                     self._session, self._agent, len(looped),
                     ", ".join(call.name for call in looped))  # fmt: skip
            self._telemetry.loop_outcome("runaway")
            await self._emit(
                GuardFired(session=self._session, agent=self._agent, outcome="runaway")
            )
            await visible.retract()  # what was shown of the loop
            await visible.finish_calls(looped)
            return self._rewritten(ModelReply("", looped, "tool_calls", usage))
        if not runaway.ended or not (runaway.prose or self._holds_calls(runaway.text)):
            return None
        log.info("%s/%s: reply ended in blank lines after %d chars; taken as it stood",
                 self._session, self._agent, len(runaway.text))  # fmt: skip
        if runaway.prose:
            await visible.ended_at(runaway.text)
        return await self._settle(ModelReply(runaway.text, (), "stop", usage), visible)

    def _looped_calls(self, runaway: RunawayText, visible: VisibleText) -> tuple[ToolCall, ...]:
        """The calls a reply made before it looped, each once (the repeat guard's identity of a
        call, :func:`~baton.engine.turn.fingerprint`), up to
        its first terminal call (where the model meant to stop: a 1.5B lead looped over an
        answer and sends that parroted a receipt): the native calls that streamed whole, or,
        when nothing was shown, calls written as text. The call the loop was found in never
        closed, so it is not among them."""
        if runaway.ended or not self.tools or self.tool_choice == "none":
            return ()
        calls: Sequence[ToolCall] = runaway.calls
        if not calls and not visible.shown:
            found = parse_text_calls(runaway.text, self._resolve)
            calls = found.calls if found is not None else ()
        once: dict[str, ToolCall] = {}
        for call in calls:
            once.setdefault(fingerprint(call.name, call.arguments), call)
            if self._ends_turn(call):
                break
        return tuple(once.values())

    def _ends_turn(self, call: ToolCall) -> bool:
        tool = self.tools.get(call.name)
        if tool is None:
            return False
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return False
        return isinstance(arguments, dict) and tool.is_terminal(arguments)

    def _holds_calls(self, text: str) -> bool:
        """Whether ``text`` holds calls written as text that would run (see :meth:`_settle`)."""
        if not self.tools or self.tool_choice == "none":
            return False
        return parse_text_calls(text, self._resolve) is not None

    def _resolve(self, call: ToolCall) -> ToolCall | None:
        """A call read from text runs when its tool is offered or the rewriter maps it."""
        rewritten = self.call_rewriter(call) if self.call_rewriter is not None else None
        if rewritten is not None:
            return rewritten
        return call if call.name in self.tools else None

    def _rewritten(self, reply: ModelReply) -> ModelReply:
        """Apply the call rewriter before the history records the calls, so the model sees the
        calls that really ran (e.g. ``send_message``, not the profile name it used as a tool)."""
        rewriter = self.call_rewriter
        if rewriter is None:
            return reply
        calls = tuple(rewriter(call) or call for call in reply.tool_calls)
        return dataclasses.replace(reply, tool_calls=calls)

    async def _cut(
        self, outcome: Literal["length", "runaway"], text: str, visible: VisibleText
    ) -> None:
        log.info(
            "%s/%s: reply cut (%s) after %d chars; asking once more for a shorter one",
            self._session,
            self._agent,
            outcome,
            len(text),
        )
        self._telemetry.loop_outcome(outcome)
        await self._emit(GuardFired(session=self._session, agent=self._agent, outcome=outcome))
        await visible.retract()

    # -- budget and failures --------------------------------------------------------------------

    async def _reserve(self, round_no: int) -> BudgetExhausted | None:
        """Count the next model call against the session's budget; the refusal, when spent."""
        if self.spend is None:
            return None
        try:
            await self.spend.reserve(self._agent)
        except BudgetExhausted as exc:
            await self._refused(exc, round_no)
            return exc
        return None

    async def _refused(self, error: BudgetExhausted, round_no: int) -> None:
        await self._failed(error, round_no)
        self._telemetry.loop_outcome("budget")
        await self._emit(GuardFired(session=self._session, agent=self._agent, outcome="budget"))

    async def _record(self, usage: Usage | None, *, estimated: bool = False) -> None:
        """Log the request's usage (``model.usage``, when known) and count it against the
        session's budget (``budget.updated``, when it has one)."""
        if usage is not None:
            await self._emit(
                ModelUsage(
                    session=self._session,
                    agent=self._agent,
                    model=self._model.model,
                    input_tokens=max(usage.prompt_tokens, 0),
                    output_tokens=max(usage.completion_tokens, 0),
                    total_tokens=max(usage.total_tokens, 0),
                    estimated=estimated,
                )
            )
        if self.spend is None:
            return
        totals = await self.spend.record(self._agent, usage)
        await self._emit(
            BudgetUpdated(
                session=self._session,
                agent=self._agent,
                calls=totals.calls,
                tokens=totals.tokens,
                max_calls=totals.limits.max_model_calls,
                max_tokens=totals.limits.max_tokens,
            )
        )

    async def _failed(self, error: ModelError, round_no: int) -> None:
        log.warning(
            "model %s failed for %s/%s: %s", self._model.model, self._session, self._agent, error
        )
        await self._emit(
            ErrorEvent(
                session=self._session,
                agent=self._agent,
                message=str(error),
                detail={
                    "kind": type(error).__name__,
                    "model": self._model.model,
                    "round": round_no,
                    "retryable": error.retryable,
                    "attempts": error.attempts,
                },
            )
        )


def estimated_usage(request: Sequence[Message], text: str) -> Usage:
    """Usage of a request cut short by the engine, estimated from characters."""
    prompt = sum(budgeting.message_chars(message) for message in request) // CHARS_PER_TOKEN
    completion = len(text) // CHARS_PER_TOKEN + 1
    return Usage(prompt, completion, prompt + completion)

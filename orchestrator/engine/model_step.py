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
  (:mod:`baton.engine.textcalls`), and every call passes the call rewriter before the round
  (:mod:`baton.engine.reply_calls`).

What a step leaves on record — usage, budget, retries, guards, failures — is
:mod:`baton.engine.step_report`'s.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from baton.engine import budget as budgeting
from baton.engine import messages as texts
from baton.engine.reply_calls import ReplyCalls
from baton.engine.step_report import StepReport
from baton.engine.stops import StopReason
from baton.engine.visible import RunawayText, VisibleText
from baton.llm.errors import BudgetExhausted, ModelError
from baton.llm.types import (
    ChatModel,
    Message,
    ModelReply,
    RetryNotice,
    TextSink,
    ToolChoice,
    Usage,
)

log = logging.getLogger(__name__)

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
    """Asks the model for one reply of one agent's turn; see the module docstring.

    What the reply's calls are is :class:`~baton.engine.reply_calls.ReplyCalls`' to say, and what
    the step leaves on record (usage, budget, retries, guards, failures) is
    :class:`~baton.engine.step_report.StepReport`'s: this decides what to ask, and when a reply is
    an answer.
    """

    __slots__ = ("_model", "calls", "report", "soft_max_rounds")

    def __init__(
        self,
        model: ChatModel,
        calls: ReplyCalls,
        report: StepReport,
        *,
        soft_max_rounds: int | None = None,
    ) -> None:
        self._model = model
        self.calls = calls
        self.report = report
        self.soft_max_rounds = soft_max_rounds

    async def ask(self, history: list[Message], round_no: int, on_text: TextSink | None) -> Asked:
        """One reply, asked once more when it was cut; never raises a ``ModelError``."""
        report, tools = self.report, self.calls.tools
        schemas = tools.schemas
        tool_choice = self._tool_choice(round_no)
        visible = VisibleText(
            report.session, report.agent, report.emit, on_text, tools.shown_arguments
        )
        on_call_delta = visible.call_delta if schemas else None
        retries = 0

        async def on_retry(notice: RetryNotice) -> None:
            # Every request counts against the budget, a retry too: a refusal raised here leaves
            # the client unretried (before its wait) and ends the step as ``budget``.
            await report.retried(notice)
            nonlocal retries
            retries += 1

        request: Sequence[Message] = history
        for second_try in (False, True):
            refused = await report.reserve(round_no)
            if refused is not None:
                return Asked(None, StopReason.BUDGET, refused, retries)
            cut: Literal["length", "runaway"]
            try:
                with report.telemetry.chat_span(self._model.model) as span:
                    reply = await self._model.complete(
                        request,
                        schemas,
                        on_text=visible.feed,
                        tool_choice=tool_choice,
                        on_retry=on_retry,
                        on_retract=visible.retract,
                        on_call_delta=on_call_delta,
                    )
                    report.telemetry.model_usage(span, self._model.model, reply.usage)
            except RunawayText as exc:
                usage = estimated_usage(request, exc.text)
                await report.record(usage, estimated=True)
                ended = await self._ended(exc, usage, visible)
                if ended is not None:
                    return Asked(ended, retries=retries)
                reply, cut = ModelReply(exc.text, (), "length", usage), "runaway"
            except BudgetExhausted as exc:  # a retry the budget refused (see on_retry)
                await visible.retract()
                await report.refused(exc, round_no)
                return Asked(None, StopReason.BUDGET, exc, retries)
            except ModelError as exc:
                await visible.retract()
                await report.failed(exc, round_no)
                return Asked(None, StopReason.ERROR, exc, retries)
            else:
                await report.record(reply.usage)
                if reply.finish_reason != "length":
                    return Asked(await self.calls.settle(reply, visible), retries=retries)
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
        choice = self.calls.tool_choice
        if (
            choice == "required"
            and self.soft_max_rounds is not None
            and round_no > self.soft_max_rounds
            and not self.calls.tools.terminal_names
        ):
            return "auto"
        return choice

    async def _ended(
        self, runaway: RunawayText, usage: Usage, visible: VisibleText
    ) -> ModelReply | None:
        """The reply a runaway ended (None: it is cut): text shown as prose, or calls written as
        text, then nothing but line breaks; or calls, then the same calls again (each is run
        once: :meth:`ReplyCalls.looped`)."""
        calls = self.calls
        looped = calls.looped(runaway, visible)
        if looped:
            log.info("%s: reply looped after %d call(s) (%s); each is run once",
                     calls.label, len(looped),
                     ", ".join(call.name for call in looped))  # fmt: skip
            await self.report.guard("runaway")
            await visible.retract()  # what was shown of the loop
            await visible.finish_calls(looped)
            return calls.rewritten(ModelReply("", looped, "tool_calls", usage))
        if not runaway.ended or not (runaway.prose or calls.holds_calls(runaway.text)):
            return None
        log.info("%s: reply ended in blank lines after %d chars; taken as it stood",
                 calls.label, len(runaway.text))  # fmt: skip
        if runaway.prose:
            await visible.ended_at(runaway.text)
        return await calls.settle(ModelReply(runaway.text, (), "stop", usage), visible)

    async def _cut(
        self, outcome: Literal["length", "runaway"], text: str, visible: VisibleText
    ) -> None:
        log.info(
            "%s: reply cut (%s) after %d chars; asking once more for a shorter one",
            self.calls.label,
            outcome,
            len(text),
        )
        await self.report.guard(outcome)
        await visible.retract()


def estimated_usage(request: Sequence[Message], text: str) -> Usage:
    """Usage of a request cut short by the engine, estimated from characters."""
    prompt = sum(budgeting.message_chars(message) for message in request) // CHARS_PER_TOKEN
    completion = len(text) // CHARS_PER_TOKEN + 1
    return Usage(prompt, completion, prompt + completion)

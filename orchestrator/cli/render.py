"""Showing a session's events in a terminal: JSON lines, plain lines, or a rich live view.

``baton run`` and ``baton watch`` read the same typed events (DESIGN §5) and hand each one to a
:class:`Renderer`. Three exist because three audiences exist: a program reading a pipe wants one
JSON object per line and nothing else (:class:`JsonRenderer`); a log file wants readable lines in
order (:class:`PlainRenderer`); a person at a terminal wants the lead's text as it streams and one
panel per sub-agent that updates in place (:class:`~baton.cli.render_live.LiveRenderer`). All
three fold events into the same :class:`~baton.session.view.SessionView` (the one the HTTP API's
state is folded into too), so what they show cannot disagree.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, Protocol

from baton.bus.events import (
    RETRACTED_DEADLINE,
    RETRACTED_SENT_BACK,
    AgentExited,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    AgentUnclaimed,
    AnswerChecked,
    ApprovalDecided,
    ApprovalRequested,
    BudgetUpdated,
    ErrorEvent,
    Event,
    GuardFired,
    ModelRetried,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
    TextDelta,
    TextRetracted,
    ToolCalled,
    dump_event,
)
from baton.session.view import LEAD_NAME as LEAD
from baton.session.view import (
    AgentView,
    SessionView,
    describe_outcome,
    describe_question,
    describe_status,
    describe_unclaimed,
    describe_verdict,
)


def agent_status(agent: AgentView) -> str:
    """A sub-agent's status in a word or two: its phase, ``exited (reason)``, or that it waits
    for a worker (no worker claimed it in time)."""
    if agent.exit_reason:
        return f"exited ({agent.exit_reason})"
    if agent.unclaimed is not None and agent.phase == "spawned":
        return f"waiting for a worker of pool {agent.unclaimed.pool}"
    return agent.phase


class Renderer(Protocol):
    """Shows events as they come; ``close`` prints the closing summary."""

    view: SessionView

    def show(self, event: Event) -> None: ...

    def join(self, history: Sequence[Event], present: Sequence[Event]) -> None:
        """Take in a session joined in mid-course: its log so far (``history``), of which
        ``present`` still holds (:mod:`baton.cli.catchup`); shows the present."""

    def close(self) -> None: ...


class JsonRenderer:
    """One JSON object per event on stdout, flushed at once; nothing else."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.view = SessionView()
        self._out = out or sys.stdout

    def show(self, event: Event) -> None:
        self.view.apply(event)
        self._out.write(dump_event(event) + "\n")
        self._out.flush()

    def join(self, history: Sequence[Event], present: Sequence[Event]) -> None:
        for event in history:
            self.view.apply(event)
        self._out.write("".join(dump_event(event) + "\n" for event in present))
        self._out.flush()

    def close(self) -> None:
        self._out.flush()


class PlainRenderer:
    """Readable lines for a pipe or a log file.

    The lead's text is written a whole line at a time (the rest waits for its newline or for the
    lead's next non-text event), so other agents' lines fall between the lead's lines rather than
    in the middle of them. Text the lead takes back (its reply failed and is retried) is dropped
    from that unwritten rest; what was already written cannot be, so a line says how much of it
    to disregard. The budget gets a line when it is first reported and whenever the spend of a
    capped quantity passes another tenth of its cap, not one per model call.
    """

    def __init__(self, out: IO[str] | None = None, *, model_label: str = "") -> None:
        self.view = SessionView()
        self._out = out or sys.stdout
        self._model_label = model_label
        self._partial = ""
        self._budget_tenths = -1

    def show(self, event: Event) -> None:
        repeat = isinstance(event, AgentSpawned) and _running(self.view, event.agent)
        retracted = self.view.retracted_chars
        self.view.apply(event)
        if isinstance(event, TextDelta):
            if event.agent == LEAD:
                lines = (self._partial + event.text).split("\n")
                self._partial = lines.pop()
                self._write(lines)
            return
        if isinstance(event, TextRetracted):
            self._retract(self.view.retracted_chars - retracted, event.why)  # as the view dropped
            return
        if event.agent == LEAD and not isinstance(event, ModelRetried):
            self._flush()  # (a retry notice is a side note: the reply's text may yet be retracted)
        if isinstance(event, BudgetUpdated):
            line = self._budget_line(event)
        elif isinstance(event, SessionStarted):
            line = describe_start(event, self._model_label)
        else:
            line = "" if repeat else describe(event)
        if line:
            self._write([line])

    def join(self, history: Sequence[Event], present: Sequence[Event]) -> None:
        for event in history:
            self.view.apply(event)  # the summary at the end knows the whole session
        self._flush()
        self._write([line for line in map(self._describe_present, present) if line])

    def _describe_present(self, event: Event) -> str:
        if isinstance(event, SessionStarted):
            return describe_start(event, self._model_label)
        return describe(event)

    def _retract(self, chars: int, why: str) -> None:
        kept = max(len(self._partial) - chars, 0)
        written = chars - (len(self._partial) - kept)
        self._partial = self._partial[:kept]
        if written > 0:
            self._flush()
            said = RETRACTED.get(why, "that reply failed and is being retried")
            self._write([f"! lead: disregard the last {written} character(s) above: {said}"])

    def _budget_line(self, event: BudgetUpdated) -> str:
        tenths = budget_tenths(event)
        if tenths <= self._budget_tenths:
            return ""
        self._budget_tenths = tenths
        return f"· budget: {describe_budget(event)}"

    def _flush(self) -> None:
        if self._partial:
            self._write([self._partial])
            self._partial = ""

    def _write(self, lines: list[str]) -> None:
        if lines:
            self._out.write("".join(line + "\n" for line in lines))
            self._out.flush()

    def close(self) -> None:
        self._flush()
        self._write(summary_lines(self.view))


def _running(view: SessionView, agent: str) -> bool:
    """Whether ``agent`` is already known and not exited (its spawn was already shown)."""
    known = view.agents.get(agent)
    return known is not None and known.running


def describe(event: Event) -> str:
    """One line about an event for people, or "" for events not worth a line."""
    match event:
        case SessionStarted():
            return describe_start(event)
        case AgentSpawned():
            return f"· {event.agent} spawned (profile {event.profile})"
        case AgentProgress():
            return f"· {event.agent}: {_short(event.content)}"
        case AgentResult():
            media = f" [{len(event.media_urls)} media]" if event.media_urls else ""
            return f"· {event.agent} result: {_short(event.content)}{media}"
        case AgentExited():
            return f"· {event.agent} exited ({event.reason})"
        case ApprovalRequested(policy=None):
            names = ", ".join(f"{c.name}({_short(c.arguments, 60)}) [{c.call_id}]"
                              for c in event.calls)  # fmt: skip
            return f"? {event.agent} asks approval for {names}"
        case ApprovalDecided():
            return f"· {event.call_id} {describe_verdict(event.approved, event.reason)}"
        case QuestionAsked():
            return f"? {event.agent} asks for {describe_question(event)} [{event.question_id}]"
        case QuestionAnswered():
            return f"· {event.question_id} {describe_outcome(event)}"
        case ToolCalled() if event.agent != LEAD and event.call.name != "send_message":
            return f"· {event.agent} calls {event.call.name}"
        case SessionFinished():
            return f"── session {event.session} {describe_status(event.status)}"
        case _:
            return _describe_trouble(event)


def describe_start(event: SessionStarted, model_label: str = "") -> str:
    """The session's header: its id, its model and its task. ``model_label`` is what the
    process that runs the session knows of the model (its endpoint too: ``llama3.1 at
    http://localhost:11434/v1 (no API key)``, :func:`~baton.settings.made.model_label`);
    a viewer elsewhere has only the event's model name."""
    label = "offline model" if event.offline else (model_label or event.model)
    return f"── session {event.session} ({label}): {describe_task(event.task)}"


def _describe_trouble(event: Event) -> str:
    """The lines that say something went wrong or was corrected: errors, guards, retries and the
    answer's check."""
    match event:
        case GuardFired():
            return f"! guard {event.outcome} on {event.agent}" + (
                f" ({event.tool})" if event.tool else ""
            )
        case ErrorEvent():
            return f"! {event.agent}: {event.message}"
        case AgentUnclaimed():
            return f"! {event.agent}: {describe_unclaimed(event)}"
        case ModelRetried():
            return f"! {event.agent}: {describe_retry(event)}"
        case AnswerChecked():
            return describe_check(event)
        case _:
            return ""


def ending_line(command: str, status: str, reason: str) -> str:
    """The closing stderr line of a session that did not complete, its status said once:
    "session timed out after 5 s", not "session timed_out: the session timed out after 5 s"."""
    words = describe_status(status)
    why = " ".join(reason.split())
    if why.lower().startswith("the session "):
        why = why[len("the session ") :]
    if not why or why.lower() == words:
        return f"{command}: session {words}"
    if why.lower().startswith(words + " "):
        return f"{command}: session {why}"
    return f"{command}: session {words}: {why}"


def describe_retry(event: ModelRetried) -> str:
    """A model retry in words: which attempt failed, why, and when the next one goes."""
    return (
        f"model request failed (attempt {event.attempt}: {_short(event.reason, 100)}); "
        f"retrying in {event.delay_s:.1f} s"
    )


def describe_budget(event: BudgetUpdated) -> str:
    """The session's spend against its caps, e.g. ``12/50 model calls, 3,400/100,000 tokens``."""

    def part(used: int, cap: int | None, unit: str) -> str:
        return f"{used:,}/{cap:,} {unit}" if cap is not None else f"{used:,} {unit}"

    return (
        f"{part(event.calls, event.max_calls, 'model calls')}, "
        f"{part(event.tokens, event.max_tokens, 'tokens')}"
    )


def budget_tenths(event: BudgetUpdated) -> int:
    """How many tenths of its cap the fuller capped quantity has used (0 without caps)."""
    used = [
        min(10, value * 10 // cap)
        for value, cap in ((event.calls, event.max_calls), (event.tokens, event.max_tokens))
        if cap
    ]
    return max(used, default=0)


def describe_check(event: AnswerChecked) -> str:
    """The answer's check in one line, or "" when it found nothing to say."""
    said = []
    if event.missing_media:
        said.append(f"{len(event.missing_media)} media URL(s) the answer left out were appended")
    if event.missing_items:
        said.append("declared item(s) without a result: " + "; ".join(event.missing_items))
    if event.invented_urls:
        said.append("it cites URL(s) no tool produced: " + ", ".join(event.invented_urls))
    if event.composed:
        said.append("the lead gave none: it was composed from the sub-agents' reports")
    return ("! answer checked: " + "; ".join(said)) if said else ""


def summary_lines(view: SessionView) -> list[str]:
    """The closing lines: the spend, retries and invented URLs when there are any, then every
    media URL (last, so they can be picked off the end and opened after the session)."""
    lines: list[str] = []
    if view.budget is not None:
        lines.append(f"spent: {describe_budget(view.budget)}")
    if view.retries:
        lines.append(f"model retries: {view.retries}")
    if view.invented_urls:
        lines.append("invented (no tool produced these):")
        lines.extend(f"  {url}" for url in view.invented_urls)
    urls = view.media_urls
    if urls:
        lines.extend(["media:", *(f"  {url}" for url in urls)])
    return lines


RETRACTED = {
    RETRACTED_SENT_BACK: "that reply was not the answer: sent back, asked again or routed",
    RETRACTED_DEADLINE: "the session deadline cut that reply; a last answer follows",
}
"""How the piped view words a retraction by its ``why`` (else: a failed reply being retried)."""

TASK_SHOWN = 200
"""Characters of the task a header shows: a 120 KB prompt is the user's own, not news to them."""


def describe_task(task: str) -> str:
    """The task on one line, cut to :data:`TASK_SHOWN` characters with a marker saying so."""
    flat = " ".join(task.split())
    if len(flat) <= TASK_SHOWN:
        return flat
    return f"{flat[:TASK_SHOWN]}… [{len(task):,} characters in all]"


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"

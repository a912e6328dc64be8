"""A session's event log as AG-UI events: the one translation every run of a thread uses.

:class:`Translator` folds the session's log from its first event, one event at a time, and says
what each means in AG-UI (docs/ag-ui.md has the table). It is fed the whole log even when a run
starts later: what is open (a message, a sub-agent invocation) and which id each thing has are
facts of the log, so every run — a reconnection on another server included — names them alike.
Events before the run's start are folded silently; :meth:`Translator.begin_run` then opens the
run (the state as it stands, every invocation still running announced again under its id) and
the events after it are emitted.

Ids, all derived from the log so they are stable across runs and servers:

- a lead round's message: ``<session>.lead.<cursor of round.started>`` (its text and its tool
  calls: one assistant message per round); a sub-agent round's likewise, with its name;
- a tool call: ``<session>:<call id>`` for the lead, ``<session>:<agent>.<call id>`` for a
  sub-agent (call ids repeat across agents, and across the sessions of a thread), with
  ``.<cursor>`` added should one repeat in the session; its result's message is
  ``<tool call id>.result``;
- an invocation (``subagentRunId``): ``<session>.<agent>.<n>``, new for every delegation — the
  agent's spawn, and each follow-up ``send_message`` to it while it lives (which delegation is
  which: :mod:`.invocations`).

A client coming back without a cursor may already hold part of what is replayed (its input's
messages): :class:`~.holdings.Holdings` says what, and content it holds — text, a tool call's
arguments, a result — is not sent again.

The translator keeps the run (its beginning, its end for an interrupt or the session's end), the
state and how questions end; the rest is told to one part a kind: :mod:`.texts` (the rounds'
text messages), :mod:`.tool_calls` (tool calls and their results) and :mod:`.subagents` (each
invocation's subagent events and progress card).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    StateDeltaEvent,
    StateSnapshotEvent,
    TokenUsage,
)

from baton.bus.events import (
    AgentClaimed,
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
    ModelRetried,
    ModelUsage,
    QuestionAnswered,
    QuestionAsked,
    RoundEnded,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    TextRetracted,
    ToolCalled,
    ToolResulted,
)
from baton.engine.questions import OpenQuestion, QuestionBook
from baton.server.ag_ui.holdings import HeldMark, Holdings
from baton.server.ag_ui.interrupts import to_interrupt
from baton.server.ag_ui.invocations import Invocations
from baton.server.ag_ui.ledger import approval_outcome, interrupt_id
from baton.server.ag_ui.links import Links
from baton.server.ag_ui.state import JsonObject, patch, project
from baton.server.ag_ui.subagents import SubagentRuns
from baton.server.ag_ui.texts import TextMessages
from baton.server.ag_ui.tool_calls import ToolCalls
from baton.server.state import StateFolder
from baton.session.view import LEAD_NAME

RESOLVED = "baton.interrupt.resolved"
"""The ``CUSTOM`` event saying how a question ended (approved, declined, expired, provided...)."""
STATEFUL = (
    SessionStarted, SessionFinished, AgentSpawned, AgentClaimed, AgentUnclaimed, AgentProgress,
    AgentResult, AgentExited, BudgetUpdated, ModelRetried, ApprovalRequested, ApprovalDecided,
    QuestionAsked, QuestionAnswered, AnswerChecked,
)  # fmt: skip
"""The events that can change the state (the rest — text, tool calls, rounds — cannot)."""


class Translator:
    """One session's log as AG-UI events (see the module docstring)."""

    def __init__(
        self,
        session: str,
        *,
        media_url: Callable[[str], str],
        delegations: Iterable[str] = (),
        holdings: Holdings | None = None,
    ) -> None:
        self.session = session
        self.links = Links(media_url)
        self.invocations = Invocations(session, delegations)
        self.holdings = holdings or Holdings()
        self.folder = StateFolder(session)
        self.book = QuestionBook()
        self.answered: set[str] = set()
        """The interrupts this run answered, open until the log says how they ended."""
        self.finished: SessionFinished | None = None
        self.lead_errors: list[str] = []
        self.held = HeldMark()
        self.texts = TextMessages(session, self.holdings, self.held, self.links)
        self.runs = SubagentRuns(self.invocations, self.folder.view, self.texts, self.links.url)
        self.calls = ToolCalls(session, self.texts, self.runs, self.holdings, self.held, self.links)
        self._requested: dict[str, ApprovalRequested] = {}
        self._state: JsonObject | None = None
        self._usage: dict[str, list[int]] = {}

    @property
    def cursor(self) -> str | None:
        """The cursor of the last logged event fed."""
        return self.held.cursor

    @property
    def live(self) -> bool:
        """Whether the run began: the events fed now are the run's."""
        return self.runs.live

    @property
    def held_through(self) -> str | None:
        """The cursor of the last logged event whose content the client holds whole."""
        return self.held.held_through

    @property
    def missing_from(self) -> str | None:
        """The cursor of the first logged event whose content the client lacks (in part)."""
        return self.held.missing_from

    def media_url(self, url: str) -> str:
        """A media URL as the client opens it (:mod:`.links`)."""
        return self.links.url(url)

    # -- the run --------------------------------------------------------------------------------

    def begin_run(self) -> list[BaseEvent]:
        """Open a run here: the state as it stands, then every invocation still running,
        announced again under its id. Events fed after this are the run's."""
        self.runs.live = True
        self.texts.new_run()
        self._usage.clear()
        self._state = self._project()
        out: list[BaseEvent] = [StateSnapshotEvent(snapshot=self._state)]
        for invocation in self.invocations.running():
            invocation.announced = False
            out.extend(self.runs.announce(invocation))
        return out

    def open_questions(self) -> list[OpenQuestion]:
        """The questions that wait for a person now (those this run answered left out)."""
        return [q for q in self.book.open() if self.interrupt_id(q.id) not in self.answered]

    def interrupt_id(self, question_id: str) -> str:
        """The interrupt id of this session's question (:mod:`.ledger`)."""
        return interrupt_id(self.session, question_id)

    def suspend(self, questions: Sequence[OpenQuestion]) -> tuple[list[BaseEvent], list[Interrupt]]:
        """End the run's part of the session for an interrupt: close the open messages, finish
        every invocation it announced as suspended (the asking ones naming their interrupts);
        returns those events and the interrupts."""
        out = self.texts.close_all(ended=False)
        interrupts = []
        asked: dict[str, list[str]] = {}
        for question in questions:
            invocation = self.invocations.newest(question.agent)
            run_id = invocation.id if invocation is not None else None
            interrupt = self.interrupt_id(question.id)
            if run_id is not None:
                asked.setdefault(run_id, []).append(interrupt)
            call = self.calls.id_of(question.agent, question.call_id)
            interrupts.append(to_interrupt(question, interrupt, call, run_id))
        out.extend(self.runs.suspended(asked))
        return out, interrupts

    def close(self, why: str) -> list[BaseEvent]:
        """The session ended: close what is still open (an invocation that never reported is
        ended with ``why`` as its error code: ``cancelled``, ``failed``...)."""
        return self.texts.close_all() + self.runs.ended(why)

    def usage(self) -> list[TokenUsage] | None:
        """The run's token usage per model, sub-agents included (None when none was logged)."""
        if not self._usage:
            return None
        return [
            TokenUsage(model=model, input_tokens=i, output_tokens=o, total_tokens=t)
            for model, (i, o, t) in self._usage.items()
        ]

    # -- folding ------------------------------------------------------------------------------

    def feed(self, cursor: str, event: Event) -> list[BaseEvent]:
        """Fold one logged event; returns what it means in AG-UI (empty before the run began)."""
        self.held.cursor = cursor
        self.folder.add(cursor, event)
        self.book.fold(event)
        out = self._translate(cursor, event)
        if not self.live:
            return []
        if isinstance(event, STATEFUL):
            out.extend(self._state_delta())
        return out

    def _translate(self, cursor: str, event: Event) -> list[BaseEvent]:
        match event:
            case RoundStarted():
                return self.texts.round_started(event.agent, cursor)
            case RoundEnded():
                return self.texts.round_ended(event.agent)
            case TextDelta():
                out, owner = self.runs.owner(event.agent)
                ended, message = self.texts.attributed(event.agent, cursor, owner)
                return out + ended + self.texts.stream(message, event.text, owner)
            case TextRetracted():
                return self._retracted(event, cursor)
            case ToolCalled():
                return self.calls.called(event, cursor)
            case ToolResulted():
                return self.calls.resulted(event)
            case _:
                return self._translate_agents(event)

    def _translate_agents(self, event: Event) -> list[BaseEvent]:
        match event:
            case AgentSpawned() if event.agent != LEAD_NAME:
                return self.runs.spawned(event)
            case AgentClaimed() | AgentUnclaimed() | AgentProgress():
                return self.runs.activity(event.agent)
            case AgentResult():
                return self.runs.result(event)
            case AgentExited():
                return self.runs.exited(event)
            case _:
                return self._translate_rest(event)

    def _translate_rest(self, event: Event) -> list[BaseEvent]:
        match event:
            case ApprovalRequested():
                for call in event.calls:
                    self._requested[call.call_id] = event
            case ApprovalDecided():
                return self._resolved(event)
            case QuestionAnswered():
                return self._resolved(event)
            case ErrorEvent():
                if event.agent == LEAD_NAME:
                    self.lead_errors.append(event.message)
                value = {"agent": event.agent, "message": event.message}
                return [self._custom("baton.error", value, event.agent)]
            case ModelUsage() if self.live:
                spent = self._usage.setdefault(event.model, [0, 0, 0])
                spent[0] += event.input_tokens
                spent[1] += event.output_tokens
                spent[2] += event.total_tokens
            case SessionFinished():
                self.finished = event
            case _:
                pass
        return []

    def _retracted(self, event: TextRetracted, cursor: str) -> list[BaseEvent]:
        """Text taken back: the message ends where it is, and what follows is a new message
        (AG-UI cannot take text back; a ``CUSTOM`` event says how much is void)."""
        retracted = self.texts.retract(event.agent, cursor)
        if retracted is None:
            return []
        out, message = retracted
        value = {"messageId": message, "chars": event.chars, "why": event.why}
        out.append(self._custom("baton.text.retracted", value, event.agent))
        return out

    # -- questions, state ---------------------------------------------------------------------

    def _resolved(self, event: ApprovalDecided | QuestionAnswered) -> list[BaseEvent]:
        value: JsonObject
        if isinstance(event, ApprovalDecided):
            self.answered.discard(self.interrupt_id(event.call_id))
            outcome = approval_outcome(self._requested.get(event.call_id), event)
            value = {"interruptId": self.interrupt_id(event.call_id), "kind": "approval",
                     "outcome": outcome,
                     "reason": event.reason, "policy": event.policy}  # fmt: skip
        else:
            self.answered.discard(self.interrupt_id(event.question_id))
            value = {"interruptId": self.interrupt_id(event.question_id), "outcome": event.outcome,
                     "reason": event.reason, "name": event.name,
                     "url": self.media_url(event.url) if event.url else ""}  # fmt: skip
        value["agent"] = event.agent
        return [self._custom(RESOLVED, value, event.agent)]

    def _custom(self, name: str, value: JsonObject, agent: str) -> BaseEvent:
        return CustomEvent(name=name, value=value, subagent_run_id=self.runs.announced_owner(agent))

    def _project(self) -> JsonObject:
        interrupts = [self.interrupt_id(question.id) for question in self.open_questions()]
        return project(self.session, self.folder.view, self.media_url, interrupts)

    def _state_delta(self) -> list[BaseEvent]:
        fresh = self._project()
        ops = patch(self._state or {}, fresh)
        self._state = fresh
        return [StateDeltaEvent(delta=ops)] if ops else []

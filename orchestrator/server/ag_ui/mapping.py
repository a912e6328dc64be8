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
- a tool call: the model's call id for the lead, ``<agent>.<call id>`` for a sub-agent (call ids
  repeat across agents), with ``.<cursor>`` added should one repeat in the session; its result's
  message is ``<tool call id>.result``;
- an invocation (``subagentRunId``): ``<session>.<agent>.<n>``, new for every delegation — the
  agent's spawn, and each follow-up ``send_message`` to it while it lives (which delegation is
  which: :mod:`.invocations`).

A client coming back without a cursor may already hold part of what is replayed (its input's
messages): :class:`~.holdings.Holdings` says what, and content it holds — text, a tool call's
arguments, a result — is not sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    Interrupt,
    StateDeltaEvent,
    StateSnapshotEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
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
from baton.server.ag_ui.holdings import Holdings
from baton.server.ag_ui.interrupts import expired, to_interrupt
from baton.server.ag_ui.invocations import Invocation, Invocations
from baton.server.ag_ui.state import JsonObject, patch, project
from baton.server.state import StateFolder
from baton.view import LEAD_NAME, describe_placement

ACTIVITY_TYPE = "baton.subagent"
"""The ``activityType`` of a sub-agent's progress card."""
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
        self._public = media_url
        self._urls: dict[str, str] = {}
        self.invocations = Invocations(session, delegations)
        self.holdings = holdings or Holdings()
        self.folder = StateFolder(session)
        self.book = QuestionBook()
        self.answered: set[str] = set()
        """Questions this run answered, open until the log says how they ended."""
        self.finished: SessionFinished | None = None
        self.lead_errors: list[str] = []
        self.cursor: str | None = None
        self.live = False
        self.held_through: str | None = None
        """The cursor of the last logged event whose content the client holds whole."""
        self.missing_from: str | None = None
        """The cursor of the first logged event whose content the client lacks (in part)."""
        self._requested: dict[str, ApprovalRequested] = {}
        self._calls: dict[tuple[str, str], str] = {}
        self._used: set[str] = set()
        self._rounds: dict[str, str] = {}
        self._chars: dict[str, int] = {}
        self._open_texts: dict[str, str | None] = {}
        self._state: JsonObject | None = None
        self._usage: dict[str, list[int]] = {}

    def media_url(self, url: str) -> str:
        """A media URL as the client opens it (remembered: the state names each again and
        again, and resolving a path under the media directory is not free)."""
        found = self._urls.get(url)
        if found is None:
            found = self._urls[url] = self._public(url)
        return found

    # -- the run --------------------------------------------------------------------------------

    def begin_run(self) -> list[BaseEvent]:
        """Open a run here: the state as it stands, then every invocation still running,
        announced again under its id. Events fed after this are the run's."""
        self.live = True
        self._open_texts.clear()
        self._usage.clear()
        self._state = self._project()
        out: list[BaseEvent] = [StateSnapshotEvent(snapshot=self._state)]
        for invocation in self.invocations.running():
            invocation.announced = False
            out.extend(self._announce(invocation))
        return out

    def open_questions(self) -> list[OpenQuestion]:
        """The questions that wait for a person now (those this run answered left out)."""
        return [q for q in self.book.open() if q.id not in self.answered]

    def suspend(self, questions: Sequence[OpenQuestion]) -> tuple[list[BaseEvent], list[Interrupt]]:
        """End the run's part of the session for an interrupt: close the open messages, finish
        every invocation it announced as suspended (the asking ones naming their interrupts);
        returns those events and the interrupts."""
        out = self._close_texts()
        interrupts = []
        asked: dict[str, list[str]] = {}
        for question in questions:
            invocation = self.invocations.newest(question.agent)
            run_id = invocation.id if invocation is not None else None
            if run_id is not None:
                asked.setdefault(run_id, []).append(question.id)
            call = self._calls.get((question.agent, question.call_id))
            interrupts.append(to_interrupt(question, call, run_id))
        for invocation in self.invocations.running():
            if invocation.announced:
                ids = asked.get(invocation.id)
                outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=ids)
                out.append(SubagentFinishedEvent(subagent_run_id=invocation.id, outcome=outcome))
                invocation.announced = False
        return out, interrupts

    def close(self, why: str) -> list[BaseEvent]:
        """The session ended: close what is still open (an invocation that never reported is
        ended with ``why`` as its error code: ``cancelled``, ``failed``...)."""
        out = self._close_texts()
        for invocation in self.invocations.running():
            if invocation.announced:
                message = f"{invocation.agent} gave no result before the session ended ({why})"
                out.append(
                    SubagentErrorEvent(
                        subagent_run_id=invocation.id, message=message, code=why.replace(" ", "_")
                    )
                )
            invocation.announced = False
        self.invocations.clear()
        return out

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
        self.cursor = cursor
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
                out = self._close_text(self._rounds.get(event.agent))
                self._rounds[event.agent] = self._message_id(event.agent, cursor)
                return out
            case RoundEnded():
                return self._close_text(self._rounds.get(event.agent))
            case TextDelta():
                return self._text(event, cursor)
            case TextRetracted():
                return self._retracted(event, cursor)
            case ToolCalled():
                return self._tool_call(event, cursor)
            case ToolResulted():
                return self._tool_result(event)
            case _:
                return self._translate_agents(cursor, event)

    def _translate_agents(self, cursor: str, event: Event) -> list[BaseEvent]:
        match event:
            case AgentSpawned() if event.agent != LEAD_NAME:
                return self._spawned(event)
            case AgentClaimed() | AgentUnclaimed() | AgentProgress():
                return self._activity(event.agent)
            case AgentResult():
                return self._result(event)
            case AgentExited():
                return self._exited(event)
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

    # -- text ---------------------------------------------------------------------------------

    def _message_id(self, agent: str, cursor: str) -> str:
        return f"{self.session}.{agent}.{cursor}"

    def _text(self, event: TextDelta, cursor: str) -> list[BaseEvent]:
        message = self._rounds.get(event.agent)
        if message is None:
            message = self._rounds[event.agent] = self._message_id(event.agent, cursor)
        out, owner = self._owner(event.agent)
        return out + self._stream_text(message, event.text, owner)

    def _stream_text(self, message: str, text: str, owner: str | None) -> list[BaseEvent]:
        """Append ``text`` to ``message``, opening it in this run first; what the client holds
        of it already is left out."""
        start = self._chars.get(message, 0)
        self._chars[message] = start + len(text)
        held = self.holdings.text.get(message, 0)
        if start + len(text) <= held:
            self._held(True)
            return []
        self._held(False)
        delta = text[max(held - start, 0) :]
        out: list[BaseEvent] = []
        if message not in self._open_texts:
            self._open_texts[message] = owner
            out.append(
                TextMessageStartEvent(message_id=message, role="assistant", subagent_run_id=owner)
            )
        out.append(TextMessageContentEvent(message_id=message, delta=delta, subagent_run_id=owner))
        return out

    def _held(self, whole: bool) -> None:
        """Note whether the client holds the content of the event being fed: the first it lacks
        and the last it holds before that say where its stream stopped."""
        if not whole and self.missing_from is None:
            self.missing_from = self.cursor
        elif whole and self.missing_from is None:
            self.held_through = self.cursor

    def _close_text(self, message: str | None) -> list[BaseEvent]:
        if message is None or message not in self._open_texts:
            return []
        owner = self._open_texts.pop(message)
        return [TextMessageEndEvent(message_id=message, subagent_run_id=owner)]

    def _close_texts(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for message in list(self._open_texts):
            out.extend(self._close_text(message))
        return out

    def _retracted(self, event: TextRetracted, cursor: str) -> list[BaseEvent]:
        """Text taken back: the message ends where it is, and what follows is a new message
        (AG-UI cannot take text back; a ``CUSTOM`` event says how much is void)."""
        message = self._rounds.get(event.agent)
        if message is None:
            return []
        out = self._close_text(message)
        self._rounds[event.agent] = f"{message}.{cursor}"
        value = {"messageId": message, "chars": event.chars, "why": event.why}
        out.append(self._custom("baton.text.retracted", value, event.agent))
        return out

    # -- tool calls ---------------------------------------------------------------------------

    def _tool_call(self, event: ToolCalled, cursor: str) -> list[BaseEvent]:
        agent, call = event.agent, event.call
        base = call.call_id if agent == LEAD_NAME else f"{agent}.{call.call_id}"
        tool_call = base if base not in self._used else f"{base}.{cursor}"
        self._used.add(tool_call)
        self._calls[(agent, call.call_id)] = tool_call
        parent = self._rounds.get(agent)
        if parent is None:
            parent = self._rounds[agent] = self._message_id(agent, cursor)
        if agent == LEAD_NAME:
            self.invocations.delegated(tool_call, call.name, call.arguments, parent)
        out, owner = self._owner(agent)
        held = self.holdings.arguments.get(tool_call)
        self._held(held is not None and held == call.arguments)
        if held is not None and held == call.arguments:
            return out
        arguments = call.arguments
        if held is not None and arguments.startswith(held):
            arguments = arguments[len(held) :]
        out.append(
            ToolCallStartEvent(
                tool_call_id=tool_call,
                tool_call_name=call.name,
                parent_message_id=parent,
                subagent_run_id=owner,
            )
        )
        if arguments:
            out.append(
                ToolCallArgsEvent(tool_call_id=tool_call, delta=arguments, subagent_run_id=owner)
            )
        out.append(ToolCallEndEvent(tool_call_id=tool_call, subagent_run_id=owner))
        return out

    def _tool_result(self, event: ToolResulted) -> list[BaseEvent]:
        agent, result = event.agent, event.result
        tool_call = self._calls.get((agent, result.call_id))
        if tool_call is None:  # its call is older than what the log kept
            return []
        out: list[BaseEvent] = []
        if agent == LEAD_NAME:
            started = self.invocations.answered(tool_call, result.content, result.is_error)
            if started is not None:  # a follow-up that reached a living agent
                out.extend(self._opened(started))
        prefix, owner = self._owner(agent)
        out.extend(prefix)
        message = f"{tool_call}.result"
        self._held(message in self.holdings.ids)
        if message not in self.holdings.ids:
            out.append(
                ToolCallResultEvent(
                    message_id=message,
                    tool_call_id=tool_call,
                    content=result.content,
                    role="tool",
                    subagent_run_id=owner,
                )
            )
        return out

    # -- sub-agents ---------------------------------------------------------------------------

    def _spawned(self, event: AgentSpawned) -> list[BaseEvent]:
        started = self.invocations.spawned(event.agent, event.profile)
        return self._opened(started) if started is not None else []

    def _opened(self, invocation: Invocation) -> list[BaseEvent]:
        """A new invocation: its card as it stands, announced when the run is live."""
        invocation.activity = self._activity_of(invocation.agent, invocation.profile)
        return self._announce(invocation)

    def _announce(self, invocation: Invocation) -> list[BaseEvent]:
        if not self.live or invocation.announced:
            return []
        invocation.announced = True
        return [
            SubagentStartedEvent(
                subagent_run_id=invocation.id,
                name=invocation.agent,
                description=f"a {invocation.profile} sub-agent",
                parent_tool_call_id=invocation.parent_call,
                parent_message_id=invocation.parent_message,
            ),
            ActivitySnapshotEvent(
                message_id=invocation.activity_id,
                activity_type=ACTIVITY_TYPE,
                content=dict(invocation.activity),
                replace=True,
                subagent_run_id=invocation.id,
            ),
        ]

    def _owner(self, agent: str) -> tuple[list[BaseEvent], str | None]:
        """The invocation an agent's event belongs to (None: the lead's), announcing it first
        when it was not yet in this run; an agent seen working with none gets one."""
        if agent == LEAD_NAME:
            return [], None
        newest = self.invocations.newest(agent)
        invocation = self.invocations.working(agent, self._profile_of(agent))
        if invocation is not newest:
            return self._opened(invocation), invocation.id
        return self._announce(invocation), invocation.id

    def _profile_of(self, agent: str) -> str:
        view = self.folder.view.agents.get(agent)
        return view.profile if view is not None and view.profile else agent

    def _activity_of(self, agent: str, profile: str) -> JsonObject:
        view = self.folder.view.agents.get(agent)
        if view is None:
            return {"agent": agent, "profile": profile, "status": "spawned", "progress": "",
                    "placement": ""}  # fmt: skip
        return {
            "agent": agent,
            "profile": view.profile or profile,
            "status": view.status,
            "progress": view.progress,
            "placement": describe_placement(view),
        }

    def _activity(self, agent: str) -> list[BaseEvent]:
        if not self.invocations.known(agent):
            return []  # a worker's claim logged before the lead's spawn: its card comes with it
        out, owner = self._owner(agent)
        invocation = self.invocations.newest(agent)
        if invocation is None or owner is None:
            return out
        fresh = self._activity_of(agent, invocation.profile)
        ops = patch(invocation.activity, fresh)
        invocation.activity = fresh
        if ops and self.live:
            out.append(
                ActivityDeltaEvent(
                    message_id=invocation.activity_id,
                    activity_type=ACTIVITY_TYPE,
                    patch=ops,
                    subagent_run_id=owner,
                )
            )
        return out

    def _result(self, event: AgentResult) -> list[BaseEvent]:
        out = self._activity(event.agent)
        invocations = self.invocations.finish(event.agent)
        result = {
            "agent": event.agent,
            "content": event.content,
            "mediaUrls": [self.media_url(url) for url in event.media_urls],
        }
        for index, invocation in enumerate(invocations):
            out.extend(self._announce(invocation))
            if index == len(invocations) - 1 and event.content:
                message = f"{invocation.id}.result"
                out.extend(self._stream_text(message, event.content, invocation.id))
                out.extend(self._close_text(message))
            if invocation.announced:
                out.append(SubagentFinishedEvent(subagent_run_id=invocation.id, result=result))
        return out

    def _exited(self, event: AgentExited) -> list[BaseEvent]:
        had = self.invocations.newest(event.agent) is not None
        out = self._activity(event.agent) if had else []
        for invocation in self.invocations.left(event.agent):
            out.extend(self._announce(invocation))
            if not invocation.announced:
                continue
            if event.reason == "finished":
                out.append(SubagentFinishedEvent(subagent_run_id=invocation.id))
            else:
                message = f"{event.agent} left without a result ({event.reason})"
                out.append(
                    SubagentErrorEvent(
                        subagent_run_id=invocation.id, message=message, code=event.reason
                    )
                )
        return out

    # -- questions, state ---------------------------------------------------------------------

    def _resolved(self, event: ApprovalDecided | QuestionAnswered) -> list[BaseEvent]:
        value: JsonObject
        if isinstance(event, ApprovalDecided):
            self.answered.discard(event.call_id)
            requested = self._requested.get(event.call_id)
            if expired(requested, event):
                outcome = "expired"
            else:
                outcome = "approved" if event.approved else "declined"
            value = {"interruptId": event.call_id, "kind": "approval", "outcome": outcome,
                     "reason": event.reason, "policy": event.policy}  # fmt: skip
        else:
            self.answered.discard(event.question_id)
            value = {"interruptId": event.question_id, "outcome": event.outcome,
                     "reason": event.reason, "name": event.name,
                     "url": self.media_url(event.url) if event.url else ""}  # fmt: skip
        value["agent"] = event.agent
        return [self._custom(RESOLVED, value, event.agent)]

    def _custom(self, name: str, value: JsonObject, agent: str) -> BaseEvent:
        invocation = self.invocations.newest(agent) if agent != LEAD_NAME else None
        owner = invocation.id if invocation is not None and invocation.announced else None
        return CustomEvent(name=name, value=value, subagent_run_id=owner)

    def _project(self) -> JsonObject:
        interrupts = [question.id for question in self.open_questions()]
        return project(self.session, self.folder.view, self.media_url, interrupts)

    def _state_delta(self) -> list[BaseEvent]:
        fresh = self._project()
        ops = patch(self._state or {}, fresh)
        self._state = fresh
        return [StateDeltaEvent(delta=ops)] if ops else []

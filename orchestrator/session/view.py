"""A session folded from its events: the one fold every view of a session shares.

The terminal views of ``baton run``/``baton watch`` (:mod:`baton.cli.render`) and the state the
HTTP API answers (:mod:`baton.server.state`) both read a session as its typed events (DESIGN §5)
and fold them here, into one :class:`SessionView`; each then only chooses how to show it. What
a terminal and a client of the API are told about a session therefore cannot disagree. (The live
page folds the same events in JavaScript, next to the HTML it updates.)

It lives in :mod:`baton.session` (the session's room, which resolves its names lazily), below both
the CLI and the server, and reads nothing but events: importing it loads neither the lead nor the
model client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

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
    QuestionAnswered,
    QuestionAsked,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    TextRetracted,
    ToolCallInfo,
    asked_for,
)
from baton.bus.messages import LEAD_NAME as LEAD_NAME

SessionStatus = Literal[
    "pending", "running", "completed", "incomplete", "failed", "cancelled", "timed_out"
]
AgentPhase = Literal["spawned", "working", "done"]
"""Where a sub-agent's work stands: started, reporting progress, or with a result given."""


@dataclass(slots=True)
class AgentView:
    """What is known about one sub-agent.

    ``phase`` is its work; ``exit_reason`` is set once it left (``finished``, ``shutdown``,
    ``lost``, ...) and cleared when it is spawned or claimed again (a lost agent resumed
    elsewhere). ``worker`` is the worker that claimed it last; ``unclaimed`` the session's
    warning that no worker had claimed it in time, until one does.
    """

    profile: str = ""
    worker: str = ""
    unclaimed: AgentUnclaimed | None = None
    phase: AgentPhase = "spawned"
    exit_reason: str = ""
    progress: str = ""
    result: str = ""
    latest: str = ""
    """The newest of its progress and result."""
    media_urls: list[str] = field(default_factory=list)
    retries: int = 0
    """Model requests of this agent that failed and were tried again."""

    @property
    def running(self) -> bool:
        """Spawned and not exited since."""
        return not self.exit_reason

    @property
    def status(self) -> str:
        """Its phase, or why it left when it did not just finish (``budget``, ``lost``...)."""
        left = self.exit_reason and self.exit_reason != "finished"
        return self.exit_reason if left else self.phase

    @property
    def waiting_for_worker(self) -> bool:
        """Still running, and no worker claimed it within the session's bound, nor since."""
        return self.unclaimed is not None and self.running


@dataclass(slots=True)
class SessionView:
    """A session folded from its events, one :meth:`apply` at a time."""

    session: str = ""
    status: SessionStatus = "pending"
    task: str = ""
    model: str = ""
    offline: bool = False
    started_at: datetime | None = None
    lead_rounds: list[str] = field(default_factory=list)
    """The lead's text, one entry per round (text before the first round opens one)."""
    agents: dict[str, AgentView] = field(default_factory=dict)
    pending: dict[tuple[str, str], ToolCallInfo] = field(default_factory=dict)
    """Approvals asked of a person and not yet decided, by (asking agent, call id)."""
    by_policy: dict[tuple[str, str], ToolCallInfo] = field(default_factory=dict)
    """Calls the session's policy is deciding (nobody is asked): named when decided."""
    questions: dict[str, QuestionAsked] = field(default_factory=dict)
    """Questions for a file or an image still open, by question id."""
    decisions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    finished: SessionFinished | None = None
    retries: int = 0
    """Model requests (of any agent) that failed and were tried again: never invisible."""
    last_retry: ModelRetried | None = None
    retracted_chars: int = 0
    """Lead text taken back because the reply it belonged to failed and was retried."""
    budget: BudgetUpdated | None = None
    """The session's spend after the latest model call (of any agent), with its caps."""
    answer_check: AnswerChecked | None = None
    """The final answer checked against what the tools produced."""

    def apply(self, event: Event) -> None:
        """Fold one event into the view."""
        match event:
            case SessionStarted():
                self._start(event)
            case TextDelta() if event.agent == LEAD_NAME:
                if not self.lead_rounds:
                    self.lead_rounds.append("")
                self.lead_rounds[-1] += event.text
            case RoundStarted() if event.agent == LEAD_NAME:
                self.lead_rounds.append("")
            case ApprovalRequested():  # one the policy answers waits for nobody
                waits = self.pending if event.policy is None else self.by_policy
                for call in event.calls:
                    waits[(event.agent, call.call_id)] = call
            case ApprovalDecided():
                key = (event.agent, event.call_id)
                asked = self.pending.pop(key, None) or self.by_policy.pop(key, None)
                name = asked.name if asked else event.call_id
                verdict = describe_verdict(event.approved, event.reason)
                self.decisions.append(f"{event.agent}: {name} {verdict}")
            case QuestionAsked() | QuestionAnswered():
                self._apply_question(event)
            case ErrorEvent():
                self.errors.append(f"{event.agent}: {event.message}")
            case SessionFinished():
                self.finished, self.status = event, event.status
                self.pending.clear()  # the session ended (a cancel included): nobody waits
                self.questions.clear()
            case _:
                if not self._apply_model(event):
                    self._apply_agent(event)

    def _start(self, event: SessionStarted) -> None:
        if event.resumed:  # the dead lead's waits: the resumed one asks anew
            self.forget_waits(LEAD_NAME)
        self.session, self.task, self.status = event.session, event.task, "running"
        self.model, self.offline, self.started_at = event.model, event.offline, event.ts

    def _apply_question(self, event: QuestionAsked | QuestionAnswered) -> None:
        if isinstance(event, QuestionAsked):
            self.questions[event.question_id] = event
            return
        asked_for = self.questions.pop(event.question_id, None)
        what = asked_for.kind if asked_for else "question"
        self.decisions.append(f"{event.agent}: {what} {describe_outcome(event)}")

    def _apply_model(self, event: Event) -> bool:
        """Fold what the model calls did (retries, retractions, spend, the answer's check);
        False for any other event."""
        match event:
            case ModelRetried():
                self.retries += 1
                self.last_retry = event
                if event.agent != LEAD_NAME:
                    self._agent(event.agent).retries += 1
            case TextRetracted() if event.agent == LEAD_NAME:
                self._retract(event.chars)
            case TextRetracted():
                pass  # a sub-agent's text is never shown, so there is nothing to take back
            case BudgetUpdated():
                self.budget = event
            case AnswerChecked():
                self.answer_check = event
            case _:
                return False
        return True

    def _retract(self, chars: int) -> None:
        """Drop the end of the lead's current reply: it is being retried and streams anew.
        Only the current round's text can belong to the failed reply."""
        if not self.lead_rounds or chars <= 0:
            return
        current = self.lead_rounds[-1]
        dropped = min(chars, len(current))
        self.lead_rounds[-1] = current[: len(current) - dropped]
        self.retracted_chars += dropped

    def _apply_agent(self, event: Event) -> None:
        match event:
            case AgentSpawned() if event.agent != LEAD_NAME:
                view = self._agent(event.agent)
                view.profile, view.exit_reason = event.profile, ""
                view.worker = view.worker or event.worker  # set only in logs that predate claims
            case AgentClaimed():
                self.forget_waits(event.agent)  # a takeover: the old instance waits no more
                view = self._agent(event.agent)
                view.profile = view.profile or event.profile
                view.worker, view.exit_reason, view.unclaimed = event.worker, "", None
            case AgentUnclaimed():
                self._agent(event.agent).unclaimed = event
            case AgentProgress():
                view = self._agent(event.agent)
                view.phase, view.progress = "working", event.content
                view.latest = event.content
            case AgentResult():
                view = self._agent(event.agent)
                view.phase, view.result = "done", event.content
                view.latest, view.media_urls = event.content, list(event.media_urls)
            case AgentExited():
                self.forget_waits(event.agent)
                self._agent(event.agent).exit_reason = event.reason
            case _:
                pass

    def forget_waits(self, agent: str) -> None:
        """Close what ``agent`` asked a person: it exited, or another instance of it took over
        (a worker that died, a resumed lead), and nobody waits on the old questions any more."""
        for waits in (self.pending, self.by_policy):
            for key in [key for key in waits if key[0] == agent]:
                del waits[key]
        for question_id in [q for q, asked in self.questions.items() if asked.agent == agent]:
            del self.questions[question_id]

    def _agent(self, name: str) -> AgentView:
        return self.agents.setdefault(name, AgentView())

    @property
    def lead_text(self) -> str:
        """Everything the lead wrote, each round's text starting on a line of its own."""
        text = ""
        for part in self.lead_rounds:
            if text and not text.endswith("\n"):
                text += "\n"
            text += part
        return text

    @property
    def lead_written(self) -> str:
        """Everything the lead wrote, exactly as streamed."""
        return "".join(self.lead_rounds)

    @property
    def answer(self) -> str:
        """The lead's final answer, once the session finished."""
        return self.finished.answer if self.finished is not None else ""

    @property
    def invented_urls(self) -> list[str]:
        """URLs the final answer cites that no tool produced."""
        if self.finished is not None and self.finished.invented_urls:
            return list(self.finished.invented_urls)
        return list(self.answer_check.invented_urls) if self.answer_check is not None else []

    @property
    def missing_media(self) -> list[str]:
        """Media the sub-agents produced that the answer left out (baton appended them)."""
        return list(self.answer_check.missing_media) if self.answer_check is not None else []

    @property
    def missing_items(self) -> list[str]:
        """Deliverables the lead declared that got no result (the session is incomplete)."""
        return list(self.answer_check.missing_items) if self.answer_check is not None else []

    @property
    def media_urls(self) -> list[str]:
        """Every media URL of the session: the final answer's, then each sub-agent's."""
        seen: dict[str, None] = {}
        if self.finished is not None:
            seen.update(dict.fromkeys(self.finished.media_urls))
        for view in self.agents.values():
            seen.update(dict.fromkeys(view.media_urls))
        return list(seen)


def describe_question(event: QuestionAsked) -> str:
    """What a question for a file or an image asks, in a few words."""
    what = asked_for(event.kind)
    types = f" ({', '.join(event.accept)})" if event.accept else ""
    prompt = f": {' '.join(event.prompt.split())[:160]}" if event.prompt else ""
    return f"{what}{types}{prompt}"


def describe_outcome(event: QuestionAnswered) -> str:
    """How a question for a file or an image ended, in a few words."""
    if event.outcome == "provided":
        return f"provided: {event.name or event.url[:120]}"
    reason = f" ({event.reason})" if event.reason and event.outcome != "cancelled" else ""
    return f"{event.outcome}{reason}"


def describe_verdict(approved: bool, reason: str) -> str:
    """An approval's verdict with its reason, the verdict said once: reasons often repeat it
    (an answer's content is "approved"; a policy's reason is "approved by policy (approve=auto)"),
    and "approved: approved" reads like a stutter."""
    verdict = "approved" if approved else "declined"
    why = " ".join(reason.split())
    if not why or why.lower() == verdict:
        return verdict
    if why.lower().startswith(verdict + " "):
        return verdict + why[len(verdict) :]
    return f"{verdict}: {why}"


def describe_placement(agent: AgentView) -> str:
    """Where a sub-agent runs, in the words every view shows (the terminal, the page, the API's
    A2A task): the worker that claimed it last, or that no worker has claimed it in time
    (``agent.unclaimed``, until one does); empty before either is known."""
    waited = agent.unclaimed
    if waited is not None:
        if not agent.waiting_for_worker:
            return f"no worker of pool {waited.pool} claimed it"
        if waited.workers is None:
            return "waiting for the session's own worker (at capacity)"
        return f"waiting for a worker of pool {waited.pool}"
    return f"worker {agent.worker}" if agent.worker else ""


def describe_unclaimed(event: AgentUnclaimed) -> str:
    """The session's warning that no worker claimed an agent in time, and what follows."""
    waited = (
        f"no worker of pool {event.pool} has claimed it in {event.waited_s:.0f} s "
        f"(profile {event.profile})"
    )
    if event.workers is None:
        return f"{waited}: the session's own worker is at capacity"
    if event.workers:
        return f"{waited}: {event.workers} live worker(s) serve it, all busy"
    return f"{waited}: no live worker of the pool serves that profile, so it is ended"


def describe_status(status: str) -> str:
    """A session status in words: ``timed_out`` is "timed out" to a reader."""
    return status.replace("_", " ")

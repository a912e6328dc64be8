"""A session's state, folded from its event log: what ``GET /sessions/{id}/state`` and the list
answer, for programs that would rather poll than stream.

The fold itself is :class:`baton.session.view.SessionView`, the one every view of a session shares
(the terminal's too); this module only projects it onto the API's schema. The live page folds the
same events itself in JavaScript.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from baton.bus.events import Event
from baton.bus.parts.log import EventLog
from baton.engine.questions import OpenQuestion, QuestionBook
from baton.session.view import AgentView, SessionStatus, SessionView

LIVE = ("pending", "running")
"""A session whose agents may still wait for an answer (once it ended, nothing does)."""


class AgentState(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    profile: str = ""
    status: str = Field("spawned", description="spawned, working, done, or why it exited")
    progress: str = ""
    result: str = ""
    media_urls: list[str] = Field(default_factory=list)
    retries: int = Field(0, description="its model requests that failed and were tried again")
    worker: str = Field("", description="the worker that runs it (the last to claim it)")
    waiting_for_worker: bool = Field(
        False, description="no worker claimed it within the session's bound, nor since"
    )


class RetryState(BaseModel):
    """The latest model retry of the session."""

    model_config = ConfigDict(defer_build=True)

    agent: str
    attempt: int = Field(description="the attempt that failed (1 = the first request)")
    reason: str
    delay_s: float = Field(description="the wait before the next attempt")


class BudgetState(BaseModel):
    """The session's spend across the lead and every sub-agent; a cap of null is no cap."""

    model_config = ConfigDict(defer_build=True)

    calls: int
    tokens: int
    max_calls: int | None = None
    max_tokens: int | None = None


class PendingApproval(BaseModel):
    model_config = ConfigDict(defer_build=True)

    agent: str
    call_id: str
    name: str
    arguments: str


class SessionState(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    status: SessionStatus = "pending"
    task: str = ""
    model: str = ""
    offline: bool = False
    started_at: str = ""
    text: str = Field("", description="everything the lead wrote, in order")
    answer: str = ""
    media_urls: list[str] = Field(default_factory=list)
    agents: list[AgentState] = Field(default_factory=list)
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    open_questions: list[OpenQuestion] = Field(
        default_factory=list,
        description="every question waiting for a person now (approvals, files, images), oldest "
        "first; answered at POST /sessions/{id}/questions/{question_id}",
    )
    retries: int = Field(0, description="model requests (of any agent) tried again")
    last_retry: RetryState | None = None
    budget: BudgetState | None = Field(None, description="null until a model call was counted")
    missing_media: list[str] = Field(
        default_factory=list, description="media the answer left out (appended to it by baton)"
    )
    invented_urls: list[str] = Field(
        default_factory=list, description="URLs the answer cites that no tool produced"
    )
    missing_items: list[str] = Field(
        default_factory=list,
        description="deliverables the lead declared (send_message items) that got no result",
    )
    events: int = 0
    last_cursor: str | None = None


class SessionSummary(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    status: SessionStatus
    task: str
    started_at: str


class SessionList(BaseModel):
    model_config = ConfigDict(defer_build=True)

    sessions: list[SessionSummary]


class StateFolder:
    """Folds logged events one at a time into a :class:`SessionView`, counting them."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.view = SessionView()
        self.questions = QuestionBook()
        self.events = 0
        self.last_cursor: str | None = None

    def add(self, cursor: str, event: Event) -> None:
        self.view.apply(event)
        self.questions.fold(event)
        self.events += 1
        self.last_cursor = cursor

    def result(self) -> SessionState:
        view = self.view
        return SessionState(
            id=self.session,
            status=view.status,
            task=view.task,
            model=view.model,
            offline=view.offline,
            started_at=view.started_at.isoformat() if view.started_at is not None else "",
            text=view.lead_written,
            answer=view.answer,
            media_urls=list(view.finished.media_urls) if view.finished is not None else [],
            agents=[_agent(name, agent) for name, agent in view.agents.items()],
            pending_approvals=[
                PendingApproval(
                    agent=agent, call_id=call.call_id, name=call.name, arguments=call.arguments
                )
                for (agent, _), call in view.pending.items()
            ],
            open_questions=self.questions.open() if view.status in LIVE else [],
            retries=view.retries,
            last_retry=_retry(view),
            budget=_budget(view),
            missing_media=view.missing_media,
            missing_items=view.missing_items,
            invented_urls=view.invented_urls,
            events=self.events,
            last_cursor=self.last_cursor,
        )


def _retry(view: SessionView) -> RetryState | None:
    last = view.last_retry
    if last is None:
        return None
    return RetryState(agent=last.agent, attempt=last.attempt, reason=last.reason,
                      delay_s=last.delay_s)  # fmt: skip


def _budget(view: SessionView) -> BudgetState | None:
    spent = view.budget
    if spent is None:
        return None
    return BudgetState(calls=spent.calls, tokens=spent.tokens, max_calls=spent.max_calls,
                       max_tokens=spent.max_tokens)  # fmt: skip


def _agent(name: str, agent: AgentView) -> AgentState:
    """An agent as the API shows it: its phase, or why it left when it did not just finish."""
    return AgentState(
        name=name,
        profile=agent.profile,
        status=agent.status,
        progress=agent.progress,
        result=agent.result,
        media_urls=list(agent.media_urls),
        retries=agent.retries,
        worker=agent.worker,
        waiting_for_worker=agent.waiting_for_worker,
    )


async def fold_session(log: EventLog, session: str) -> StateFolder:
    """The session's log as of now, folded (nothing folded when it has no log yet)."""
    folder = StateFolder(session)
    async for logged in log.tail(session, follow=False):
        folder.add(logged.cursor, logged.event)
    return folder


async def session_state(log: EventLog, session: str) -> SessionState:
    """The state of a session as of now (an empty ``pending`` state when it has no log yet)."""
    return (await fold_session(log, session)).result()


async def list_sessions(log: EventLog, limit: int) -> SessionList:
    """The newest ``limit`` sessions on the bus with their status and task."""
    rows: list[SessionSummary] = []
    for session in (await log.sessions())[:limit]:
        state = await session_state(log, session)
        rows.append(SessionSummary(id=session, status=state.status, task=state.task,
                                   started_at=state.started_at))  # fmt: skip
    return SessionList(sessions=rows)

"""A session's state, folded from its event log: what ``GET /sessions/{id}/state`` and the list
answer, for programs that would rather poll than stream.

The fold itself is :class:`baton.view.SessionView`, the one every view of a session shares (the
terminal's too); this module only projects it onto the API's schema. The live page folds the same
events itself in JavaScript.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from baton.bus.base import Bus
from baton.bus.events import Event
from baton.view import AgentView, SessionStatus, SessionView


class AgentState(BaseModel):
    name: str
    profile: str = ""
    status: str = Field("spawned", description="spawned, working, done, or why it exited")
    progress: str = ""
    result: str = ""
    media_urls: list[str] = Field(default_factory=list)


class PendingApproval(BaseModel):
    agent: str
    call_id: str
    name: str
    arguments: str


class SessionState(BaseModel):
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
    events: int = 0
    last_cursor: str | None = None


class SessionSummary(BaseModel):
    id: str
    status: SessionStatus
    task: str
    started_at: str


class SessionList(BaseModel):
    sessions: list[SessionSummary]


class StateFolder:
    """Folds logged events one at a time into a :class:`SessionView`, counting them."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.view = SessionView()
        self.events = 0
        self.last_cursor: str | None = None

    def add(self, cursor: str, event: Event) -> None:
        self.view.apply(event)
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
            events=self.events,
            last_cursor=self.last_cursor,
        )


def _agent(name: str, agent: AgentView) -> AgentState:
    """An agent as the API shows it: its phase, or why it left when it did not just finish."""
    left = agent.exit_reason and agent.exit_reason != "finished"
    return AgentState(
        name=name,
        profile=agent.profile,
        status=agent.exit_reason if left else agent.phase,
        progress=agent.progress,
        result=agent.result,
        media_urls=list(agent.media_urls),
    )


async def session_state(bus: Bus, session: str) -> SessionState:
    """The state of a session as of now (an empty ``pending`` state when it has no log yet)."""
    folder = StateFolder(session)
    async for logged in bus.events(session, follow=False):
        folder.add(logged.cursor, logged.event)
    return folder.result()


async def list_sessions(bus: Bus, limit: int) -> SessionList:
    """The newest ``limit`` sessions on the bus with their status and task."""
    rows: list[SessionSummary] = []
    for session in (await bus.sessions())[:limit]:
        state = await session_state(bus, session)
        rows.append(SessionSummary(id=session, status=state.status, task=state.task,
                                   started_at=state.started_at))  # fmt: skip
    return SessionList(sessions=rows)

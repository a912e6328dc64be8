"""A session's state, folded from its event log: what ``GET /sessions/{id}/state`` and the list
answer. The live page folds the same events itself in JavaScript; this is the server-side twin for
programs that would rather poll than stream."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from baton.bus.base import Bus
from baton.bus.events import (
    AgentExited,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    ApprovalDecided,
    ApprovalRequested,
    Event,
    SessionFinished,
    SessionStarted,
    TextDelta,
    ToolCallInfo,
)
from baton.lead.prompt import LEAD_NAME

SessionStatus = Literal["pending", "running", "completed", "failed", "cancelled", "timed_out"]


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
    """Folds events one at a time; small enough to keep beside the page's JavaScript twin."""

    def __init__(self, session: str) -> None:
        self.state = SessionState(id=session)
        self._agents: dict[str, AgentState] = {}
        self._pending: dict[tuple[str, str], PendingApproval] = {}
        self._text: list[str] = []

    def add(self, cursor: str, event: Event) -> None:
        state = self.state
        state.events += 1
        state.last_cursor = cursor
        if isinstance(event, SessionStarted):
            state.status, state.task, state.model = "running", event.task, event.model
            state.offline, state.started_at = event.offline, event.ts.isoformat()
        elif isinstance(event, SessionFinished):
            state.status, state.answer = event.status, event.answer
            state.media_urls = list(event.media_urls)
        elif isinstance(event, TextDelta) and event.agent == LEAD_NAME:
            self._text.append(event.text)
        elif isinstance(event, AgentSpawned) and event.agent != LEAD_NAME:
            self._agent(event.agent).profile = event.profile
        elif isinstance(event, AgentProgress):
            agent = self._agent(event.agent)
            agent.status, agent.progress = "working", event.content
        elif isinstance(event, AgentResult):
            agent = self._agent(event.agent)
            agent.status, agent.result = "done", event.content
            agent.media_urls = list(event.media_urls)
        elif isinstance(event, AgentExited) and event.reason != "finished":
            self._agent(event.agent).status = event.reason
        elif isinstance(event, ApprovalRequested):
            for call in event.calls:
                self._pending[(event.agent, call.call_id)] = _pending(event.agent, call)
        elif isinstance(event, ApprovalDecided):
            self._pending.pop((event.agent, event.call_id), None)

    def result(self) -> SessionState:
        state = self.state
        state.text = "".join(self._text)
        state.agents = list(self._agents.values())
        state.pending_approvals = list(self._pending.values())
        return state

    def _agent(self, name: str) -> AgentState:
        agent = self._agents.get(name)
        if agent is None:
            agent = self._agents[name] = AgentState(name=name)
        return agent


def _pending(agent: str, call: ToolCallInfo) -> PendingApproval:
    return PendingApproval(agent=agent, call_id=call.call_id, name=call.name,
                           arguments=call.arguments)  # fmt: skip


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

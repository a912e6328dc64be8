"""A session's events as one A2A task: the fold that answers ``GetTask`` and feeds every stream.

A :class:`TaskTracker` reads a session's logged events in order (as the HTTP API's state does,
:mod:`baton.server.state`) and turns each into the A2A objects it means (docs/a2a.md, *Mapping*):

- a sub-agent starting, waiting for a worker, claimed by one, its progress, its result, an
  error, an approval decided → ``TaskStatusUpdateEvent`` WORKING with a message saying so;
- each media URL of a result (and of the final answer) → a ``TaskArtifactUpdateEvent`` with a
  ``url`` part and its ``mediaType`` (once per URL);
- an approval asked for → INPUT_REQUIRED, the message naming the call;
- ``session.finished`` → the answer as the ``answer`` artifact, then the terminal status (the
  table in :data:`TERMINAL`) with the answer as its message.

The same fold gives the snapshot (:meth:`TaskTracker.snapshot`) of a task read from its log and
the updates of a stream that follows it live, so what a poller and a subscriber see agree; and
since it reads only the bus, any server on the same bus answers alike.
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from baton.bus.events import (
    AgentClaimed,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    AgentUnclaimed,
    ApprovalDecided,
    ApprovalRequested,
    ErrorEvent,
    Event,
    SessionFinished,
    SessionStarted,
)
from baton.server.a2a.contexts import context_of, request_of
from baton.session.view import LEAD_NAME, describe_unclaimed, describe_verdict

Update = TaskStatusUpdateEvent | TaskArtifactUpdateEvent
ANSWER_ARTIFACT = "answer"

TERMINAL: dict[str, TaskState] = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "incomplete": TaskState.TASK_STATE_FAILED,
    "failed": TaskState.TASK_STATE_FAILED,
    "timed_out": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}
"""baton's session statuses (docs/protocol.md) as A2A's terminal states; the status itself
travels in the status update's metadata (``baton.status``), since A2A has no ``incomplete``."""
STOPS = frozenset({*TERMINAL.values(), TaskState.TASK_STATE_INPUT_REQUIRED})
"""The states a stream ends at: terminal, or waiting for the client's next message."""


def media_type(url: str) -> str:
    """The media type a URL's name says (``application/octet-stream`` when it says none)."""
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    return guessed or "application/octet-stream"


def agent_message(session: str, message_id: str, text: str) -> Message:
    """A message from the agent (baton) in the task's context."""
    return Message(
        message_id=message_id,
        context_id=context_of(session),
        task_id=session,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


class TaskTracker:
    """One session folded into an A2A task, event by event (see the module docstring).

    ``public_url`` turns a media URL a tool produced into one a client can fetch (``/media/…``
    under the server's root URL for a file in the media directory)."""

    def __init__(self, session: str, public_url: Callable[[str], str]) -> None:
        self.session = session
        self.context = context_of(session)
        """The task's A2A context (:mod:`.contexts`: written in the session's id)."""
        self.public_url = public_url
        self.task_text = ""
        self.state: TaskState = TaskState.TASK_STATE_SUBMITTED
        self.status_message: Message | None = None
        self.timestamp = datetime.now(UTC)
        self.artifacts: dict[str, Artifact] = {}
        self.pending: dict[tuple[str, str], str] = {}
        """Approvals asked for and not decided: (agent, call id) -> what the call is."""
        self.calls: dict[tuple[str, str], str] = {}
        """Every approval asked for, decided or not (to name it when its decision comes)."""
        self.finished: SessionFinished | None = None
        self.events = 0
        self.cursor: str | None = None
        """The cursor of the last event folded: a live tail resumes after it."""

    @property
    def terminal(self) -> bool:
        return self.finished is not None

    @property
    def stopped(self) -> bool:
        """At a state where a stream ends: terminal, or waiting for input."""
        return self.state in STOPS

    def seed(self, task: str) -> None:
        """A task just started here, before its first event is logged."""
        self.task_text = task

    def answered(self, keys: list[tuple[str, str]], verdict: str) -> TaskStatusUpdateEvent:
        """Approvals answered by the client's message: WORKING again (their ``approval.decided``
        events follow when the agents read the answers)."""
        for key in keys:
            self.pending.pop(key, None)
        return self._status(TaskState.TASK_STATE_WORKING, verdict, f"{self.cursor or 0}-answer")

    def apply(self, cursor: str, event: Event) -> list[Update]:
        """Fold one logged event; returns the A2A updates it means (often none)."""
        self.events += 1
        self.cursor = cursor
        self.timestamp = event.ts if event.ts.tzinfo else event.ts.replace(tzinfo=UTC)
        match event:
            case SessionStarted():
                self.task_text = request_of(event.task)  # as the client sent it
                return [self._status(TaskState.TASK_STATE_WORKING, "working on it", cursor)]
            case AgentSpawned() if event.agent != LEAD_NAME:
                return [self._working(f"{event.agent} started ({event.profile})", cursor)]
            case AgentUnclaimed():  # the client reads why nothing happens yet
                return [self._working(f"{event.agent}: {describe_unclaimed(event)}", cursor)]
            case AgentClaimed():
                return [self._working(f"{event.agent} runs on worker {event.worker}", cursor)]
            case AgentProgress():
                return [self._working(f"{event.agent}: {event.content}", cursor)]
            case AgentResult():
                found = self._media(event.agent, event.media_urls, event.content)
                return [*found, self._working(f"{event.agent}: {event.content}", cursor)]
            case ErrorEvent():
                return [self._working(f"{event.agent}: error: {event.message}", cursor)]
            case ApprovalRequested():
                return self._asked(event, cursor)
            case ApprovalDecided():
                self.pending.pop((event.agent, event.call_id), None)
                asked = self.calls.get((event.agent, event.call_id), event.call_id)
                verdict = describe_verdict(event.approved, event.reason)
                state = TaskState.TASK_STATE_INPUT_REQUIRED if self.pending else None
                return [self._status(state or TaskState.TASK_STATE_WORKING,
                                     f"{event.agent}: {asked} {verdict}", cursor)]  # fmt: skip
            case SessionFinished():
                return self._finish(event, cursor)
            case _:
                return []

    def _asked(self, event: ApprovalRequested, cursor: str) -> list[Update]:
        """``input-required``, unless the session's policy decides (nobody is asked: its
        ``approval.decided`` follows, a working status)."""
        named = {(event.agent, c.call_id): f"{c.name}({c.arguments})" for c in event.calls}
        self.calls.update(named)
        if event.policy is not None:
            return []
        self.pending.update(named)
        asks = "; ".join(f"{event.agent} asks to run {call.name}({call.arguments})"
                         for call in event.calls)  # fmt: skip
        text = f"{asks}. Reply 'approve' to let it run; anything else declines."
        return [self._status(TaskState.TASK_STATE_INPUT_REQUIRED, text, cursor)]

    def _finish(self, event: SessionFinished, cursor: str) -> list[Update]:
        self.finished = event
        self.pending.clear()
        updates: list[Update] = list(self._media(LEAD_NAME, event.media_urls, ""))
        answer = event.answer or f"the session ended: {event.status.replace('_', ' ')}"
        artifact = Artifact(artifact_id=ANSWER_ARTIFACT, name=ANSWER_ARTIFACT,
                            parts=[Part(text=answer, media_type="text/plain")])  # fmt: skip
        self.artifacts[ANSWER_ARTIFACT] = artifact
        updates.append(self._artifact_update(artifact))
        status = self._status(TERMINAL.get(event.status, TaskState.TASK_STATE_FAILED),
                              answer, cursor)  # fmt: skip
        status.metadata.update({"baton.status": event.status})
        updates.append(status)
        return updates

    def _media(self, agent: str, urls: list[str], about: str) -> list[TaskArtifactUpdateEvent]:
        updates = []
        for url in urls:
            public = self.public_url(url)
            key = "media-" + hashlib.sha256(public.encode()).hexdigest()[:16]
            if key in self.artifacts:
                continue
            name = urlsplit(public).path.rsplit("/", 1)[-1] or "media"
            part = Part(url=public, media_type=media_type(public), filename=name)
            artifact = Artifact(artifact_id=key, name=agent, description=about[:500],
                                parts=[part])  # fmt: skip
            self.artifacts[key] = artifact
            updates.append(self._artifact_update(artifact))
        return updates

    def _artifact_update(self, artifact: Artifact) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(task_id=self.session, context_id=self.context,
                                       artifact=artifact, last_chunk=True)  # fmt: skip

    def _working(self, text: str, cursor: str) -> TaskStatusUpdateEvent:
        state = TaskState.TASK_STATE_INPUT_REQUIRED if self.pending else None
        return self._status(state or TaskState.TASK_STATE_WORKING, text, cursor)

    def _status(self, state: TaskState, text: str, cursor: str) -> TaskStatusUpdateEvent:
        self.state = state
        self.status_message = agent_message(self.session, f"{self.session}-{cursor}", text)
        return TaskStatusUpdateEvent(task_id=self.session, context_id=self.context,
                                     status=self._task_status())  # fmt: skip

    def _task_status(self) -> TaskStatus:
        status = TaskStatus(state=self.state, timestamp=self.timestamp)
        if self.status_message is not None:
            status.message.CopyFrom(self.status_message)
        return status

    def snapshot(self, history_length: int | None = None, *, artifacts: bool = True) -> Task:
        """The task as of the last event folded (``GetTask``, a stream's first event)."""
        task = Task(id=self.session, context_id=self.context, status=self._task_status())
        if artifacts:
            task.artifacts.extend(self.artifacts.values())
        history: list[Message] = []
        if self.task_text:
            asked = Message(message_id=f"{self.session}-task", context_id=self.context,
                            task_id=self.session, role=Role.ROLE_USER,
                            parts=[Part(text=self.task_text)])  # fmt: skip
            history.append(asked)
        if self.finished is not None and self.status_message is not None:
            history.append(self.status_message)
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        task.history.extend(history)
        if self.finished is not None:
            task.metadata.update({"baton.status": self.finished.status})
        return task

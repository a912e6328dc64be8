"""What a remote A2A agent's stream means to baton: one :class:`Exchange` folds its events.

Each ``StreamResponse`` of a ``SendStreamingMessage`` (or a ``SubscribeToTask``) is folded into
the exchange as it arrives, and says what the relay must do now (:class:`Step`):

- a ``WORKING`` status with a message: report its text to the lead as progress (a local agent's
  progress, as far as the lead can tell);
- an artifact: its text parts join the result text, its ``url`` parts the media URLs, and its
  ``raw`` parts are kept for the media store (which gives them URLs the lead can open);
- ``INPUT_REQUIRED``: ask a person the remote's question (the relay asks it as an approval);
- ``COMPLETED``, or a plain ``Message`` answer: the result; ``FAILED``, ``REJECTED``,
  ``CANCELED`` or ``AUTH_REQUIRED``: an error the lead reads, quoting the remote's own words.

The ids it saw (``contextId``, ``taskId``) are kept, so a follow-up continues the same context.
Pure data in, data out: no I/O here, so every mapping is tested without a server.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from a2a.types import Artifact, Message, Part, StreamResponse, TaskState, TaskStatus

_ERROR_STATES = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected the task",
    TaskState.TASK_STATE_CANCELED: "cancelled the task",
    TaskState.TASK_STATE_AUTH_REQUIRED: "asked for authentication, which baton cannot give",
}
TERMINAL = frozenset(
    {TaskState.TASK_STATE_COMPLETED, *_ERROR_STATES} - {TaskState.TASK_STATE_AUTH_REQUIRED}
)
"""States after which a task takes no more messages (a follow-up starts a new task).
``AUTH_REQUIRED`` is not one (the task waits on the remote): baton ends it as an error, and so
cancels it there."""


class Step(enum.Enum):
    """What the relay does after folding one event."""

    GO_ON = "go on"
    PROGRESS = "progress"
    """Report :attr:`Exchange.progress` (the newest status message) to the lead."""
    ASK = "ask"
    """Ask a person :attr:`Exchange.question`, then send the answer as the next message."""
    DONE = "done"
    """The task completed (or the remote answered with a message): :attr:`Exchange.text`."""
    FAILED = "failed"
    """The task ended without a result: :attr:`Exchange.error` says why."""


@dataclass(slots=True)
class RawMedia:
    """Bytes an artifact carried inline, for the media store."""

    data: bytes
    media_type: str
    name: str


@dataclass(slots=True)
class Exchange:
    """One conversation with the remote agent, folded event by event (see the module)."""

    context_id: str = ""
    task_id: str = ""
    state: TaskState = TaskState.TASK_STATE_UNSPECIFIED
    texts: list[str] = field(default_factory=list)
    """The result's text: artifacts' text parts, and the final status message or answer."""
    media: list[str] = field(default_factory=list)
    raw: list[RawMedia] = field(default_factory=list)
    progress: str = ""
    question: str = ""
    error: str = ""
    _text_of: dict[str, int] = field(default_factory=dict)
    """Where each artifact's text is in :attr:`texts`, for the chunks appended to it."""
    _raw_of: dict[str, list[RawMedia]] = field(default_factory=dict)
    """Each artifact's inline media, replaced with it."""

    @property
    def text(self) -> str:
        return "\n\n".join(text for text in self.texts if text.strip())

    @property
    def open_task(self) -> str:
        """The task a next message continues: the current one unless it ended."""
        return "" if self.state in TERMINAL else self.task_id

    def fold(self, response: StreamResponse) -> Step:
        """Take one event in; says what to do now."""
        kind = response.WhichOneof("payload")
        if kind == "message":
            return self._answer(response.message)
        if kind == "task":
            task = response.task
            self._ids(task.context_id, task.id)
            for artifact in task.artifacts:
                self._artifact(artifact)
            return self._status(task.status, snapshot=True)
        if kind == "status_update":
            update = response.status_update
            self._ids(update.context_id, update.task_id)
            return self._status(update.status)
        if kind == "artifact_update":
            update = response.artifact_update
            self._ids(update.context_id, update.task_id)
            self._artifact(update.artifact, append=update.append)
        return Step.GO_ON

    def _ids(self, context_id: str, task_id: str) -> None:
        self.context_id = context_id or self.context_id
        self.task_id = task_id or self.task_id

    def _answer(self, message: Message) -> Step:
        """A plain message instead of a task: the whole answer."""
        self._ids(message.context_id, message.task_id)
        self._parts(message.parts)
        self.state = TaskState.TASK_STATE_COMPLETED
        return Step.DONE

    def _artifact(self, artifact: Artifact, *, append: bool = False) -> None:
        """An artifact, or a chunk of one (``append``: its text continues the artifact's). An
        artifact whose id was seen already, not appended, is that artifact whole again (a task's
        snapshot, as a resubscribed stream starts with, or a replacement): it takes the place of
        what it said before instead of being counted twice."""
        key = artifact.artifact_id
        if not key:  # no id: nothing can continue or repeat it
            self._parts(artifact.parts, artifact.name)
            return
        text = _text(artifact.parts, "" if append else "\n\n")
        raw = _raw(artifact.parts, artifact.name)
        self._urls(artifact.parts)
        at = self._text_of.get(key)
        if at is None:
            self._text_of[key] = len(self.texts)
            self.texts.append(text)
        elif append:
            self.texts[at] += text
        else:
            self.texts[at] = text
            before = self._raw_of.pop(key, [])
            self.raw = [r for r in self.raw if not any(r is old for old in before)]
        self._raw_of.setdefault(key, []).extend(raw)
        self.raw.extend(raw)

    def _urls(self, parts: Sequence[Part]) -> None:
        for part in parts:
            if part.WhichOneof("content") == "url" and part.url not in self.media:
                self.media.append(part.url)

    def _parts(self, parts: Sequence[Part], name: str = "") -> None:
        self.texts.extend(part.text for part in parts if part.WhichOneof("content") == "text")
        self._urls(parts)
        self.raw.extend(_raw(parts, name))

    def _status(self, status: TaskStatus, *, snapshot: bool = False) -> Step:
        """``snapshot``: the status of a whole task (a stream's first event, as a resubscribed
        one starts with), whose message may be the progress already reported."""
        self.state = status.state
        said = _text(status.message.parts) if status.HasField("message") else ""
        if status.state == TaskState.TASK_STATE_COMPLETED:
            if said:
                self.texts.append(said)
            return Step.DONE
        if status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            self.question = said or "The remote agent needs more input to go on."
            return Step.ASK
        if status.state in _ERROR_STATES:
            how = _ERROR_STATES[status.state]
            self.error = f"the remote agent {how}" + (f": {said}" if said else "")
            return Step.FAILED
        if said and status.state == TaskState.TASK_STATE_WORKING:
            if snapshot and said == self.progress:
                return Step.GO_ON
            self.progress = said
            return Step.PROGRESS
        return Step.GO_ON


def _raw(parts: Sequence[Part], name: str) -> list[RawMedia]:
    return [
        RawMedia(part.raw, part.media_type, part.filename or name or "artifact")
        for part in parts
        if part.WhichOneof("content") == "raw"
    ]


def _text(parts: Sequence[Part], between: str = "\n") -> str:
    return between.join(part.text for part in parts if part.WhichOneof("content") == "text")

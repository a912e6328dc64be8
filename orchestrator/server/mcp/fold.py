"""What an MCP call needs to know of a session, folded from its event log.

One fold serves every reader: ``run`` while it follows its session, and ``tasks/get`` on any
server of the bus (a task is its session: nothing else records where it stands). The fold keeps
the questions that wait for a person (the engine's :class:`~baton.engine.questions.QuestionBook`),
the newest progress line (a task's ``statusMessage``), when the log last changed (its
``lastUpdatedAt``), the end, and what the result should say beside the answer: why the work is
incomplete or failed.
"""

from __future__ import annotations

from datetime import datetime

from baton.bus.events import (
    AnswerChecked,
    ErrorEvent,
    Event,
    SessionFinished,
    SessionStarted,
)
from baton.engine.questions import OpenQuestion, QuestionBook
from baton.server.mcp.progress import progress_line, short

ERRORS_KEPT = 3
"""The newest error events a failed session's notes repeat."""


class LogFold:
    """A session's log read so far (see the module docstring); :meth:`apply` each event."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.book = QuestionBook()
        self.started: SessionStarted | None = None
        self.finished: SessionFinished | None = None
        self.line = ""
        """The newest progress line."""
        self.updated: datetime | None = None
        self.events = 0
        self.cursor: str | None = None
        self._reasons: list[str] = []
        self._errors: list[str] = []

    def apply(self, cursor: str, event: Event) -> str | None:
        """Fold one event; returns its progress line, if it is worth one."""
        self.events += 1
        self.cursor = cursor
        self.updated = event.ts
        self.book.fold(event)
        match event:
            case SessionStarted():
                self.started = event
            case SessionFinished():
                self.finished = event
            case AnswerChecked():
                self._reasons = list(event.reasons)
            case ErrorEvent():
                self._errors = [*self._errors, short(f"{event.agent}: {event.message}")]
                self._errors = self._errors[-ERRORS_KEPT:]
        line = progress_line(event)
        if line:
            self.line = line
        return line

    def open_questions(self) -> list[OpenQuestion]:
        return self.book.open()

    def notes(self) -> list[str]:
        """Why a session that ended did not complete, from its log."""
        if self.finished is None or self.finished.status == "completed":
            return []
        if self.finished.status == "incomplete":
            return [short(reason, 400) for reason in self._reasons]
        if self.finished.status == "failed":
            return list(self._errors)
        return []

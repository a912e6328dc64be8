"""The questions of a thread's sessions, as interrupts: their ids, and how each one ended.

A thread is one session after another, and each session's agents number their questions anew (an
approval's id is the gated call's, which the model numbers): two sessions of a thread can ask a
question of the same id. An interrupt's id is therefore ``<session>:<question id>`` (``:`` is in
no session id), as a tool call's is, so a ``resume`` entry names one question of one session —
answered there when it is open, and otherwise reported with how it ended. A bare question id
still names a question of the thread's newest session.

:class:`Ledger` folds one session's log into what a ``resume`` entry needs: the questions open
(the engine's :class:`~baton.engine.questions.QuestionBook`), and how every question asked ended —
answered (approved, declined, provided, cancelled), expired (nobody answered in time: an expiry,
never the person's decline, whether or not the session has ended since), closed (its agent
stopped waiting: a cancel), or left unanswered when the session ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from baton.bus.base import Bus
from baton.bus.events import (
    ApprovalDecided,
    ApprovalRequested,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    utc_now,
)
from baton.engine.approval import WITHDRAWN
from baton.engine.questions import QuestionBook

SEPARATOR = ":"
"""Between the session and the question in an interrupt's id: in no session id."""


def interrupt_id(session: str, question_id: str) -> str:
    """The interrupt id of ``session``'s question ``question_id``."""
    return f"{session}{SEPARATOR}{question_id}"


def split_interrupt_id(value: str, newest: str) -> tuple[str, str]:
    """The session and the question an interrupt id names (a bare id: ``newest``'s)."""
    session, separator, question = value.partition(SEPARATOR)
    return (session, question) if separator else (newest, value)


def approval_outcome(requested: ApprovalRequested | None, decided: ApprovalDecided) -> str:
    """How an approval ended: ``approved``, ``declined``, ``expired`` (nobody answered, and it
    was decided at or after its ``expires_at``: the engine declines at its timeout) or
    ``closed`` (its agent stopped waiting: cancelled, nobody declined it)."""
    if decided.approved:
        return "approved"
    if decided.policy is None and requested is not None and requested.expires_at is not None:
        if decided.ts >= requested.expires_at:
            return "expired"
    if decided.policy is None and decided.reason == WITHDRAWN:
        return "closed"
    return "declined"


@dataclass(frozen=True, slots=True)
class Closed:
    """Why a ``resume`` entry answers nothing (reported in the stream, not refused)."""

    why: str
    expired: bool = False


@dataclass(slots=True)
class Ledger:
    """One session's questions as its log stands (see the module docstring)."""

    book: QuestionBook = field(default_factory=QuestionBook)
    endings: dict[str, str] = field(default_factory=dict)
    """How each question that was answered or decided ended (an outcome, ``expired``...)."""
    asked: dict[str, datetime | None] = field(default_factory=dict)
    """Every question asked, with when it expires."""
    ended_at: datetime | None = None
    """When the session ended (None: it has not, as far as its log says)."""
    _requested: dict[str, ApprovalRequested] = field(default_factory=dict)

    def fold(self, event: object) -> None:
        self.book.fold(event)
        match event:
            case ApprovalRequested():
                for call in event.calls:
                    self._requested[call.call_id] = event
                    self.asked[call.call_id] = event.expires_at
            case ApprovalDecided():
                outcome = approval_outcome(self._requested.get(event.call_id), event)
                self.endings[event.call_id] = outcome
            case QuestionAsked():
                self.asked[event.question_id] = event.expires_at
            case QuestionAnswered():
                self.endings[event.question_id] = event.outcome
            case SessionFinished():
                self.ended_at = event.ts
            case _:
                pass

    def expired(self, question: str) -> bool:
        """Whether ``question`` ended by expiring: logged so, or its time ran out before anything
        else ended it (its agent stopped waiting then, whatever ended the session after)."""
        ending = self.endings.get(question)
        if ending is not None:
            return ending == "expired"
        expires = self.asked.get(question)
        return expires is not None and expires <= (self.ended_at or utc_now())

    def closed(self, session: str, question: str, given: str, *, live: bool) -> Closed:
        """Why the entry ``given`` for ``question`` answers nothing now (it is not open, or
        ``session`` is not ``live``)."""
        if question not in self.asked:
            return Closed(f"interrupt {given}: no such question was asked in session {session}")
        if self.expired(question):
            return Closed(
                f"interrupt {given} expired: nobody answered in time, so the agent stopped "
                "waiting and went on without it (an expiry, not a decline)",
                expired=True,
            )
        ending = self.endings.get(question)
        if ending == "closed":
            return Closed(f"interrupt {given} was closed: its agent stopped waiting (cancelled)")
        if ending is not None:
            return Closed(f"interrupt {given} was already answered in session {session} ({ending})")
        if not live:
            return Closed(f"interrupt {given} was closed unanswered: session {session} has ended")
        return Closed(f"interrupt {given} was closed unanswered: its agent no longer waits")


async def ledger_of(bus: Bus, session: str) -> Ledger:
    """``session``'s questions as its log stands now."""
    ledger = Ledger()
    async for logged in bus.log.tail(session, follow=False):
        ledger.fold(logged.event)
    return ledger

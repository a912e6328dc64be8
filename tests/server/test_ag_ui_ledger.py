"""How a ``resume`` entry is read against the questions of a thread's sessions
(baton.server.ag_ui.ledger, baton.server.ag_ui.interrupts.read_resume): interrupt ids scoped by
session, an answer taken only for the live session's open question, and every other entry
reported with how its question ended — an expiry as an expiry, whatever ended the session
since."""

from __future__ import annotations

from datetime import timedelta

from ag_ui.core import ResumeEntry

from baton.bus.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    SessionFinished,
    ToolCallInfo,
    utc_now,
)
from baton.server.ag_ui.interrupts import read_resume
from baton.server.ag_ui.ledger import Ledger, interrupt_id, split_interrupt_id

FIRST, SECOND = "t-9", "t-9.t2"


def ledger(events: list[Event]) -> Ledger:
    folded = Ledger()
    for event in events:
        folded.fold(event)
    return folded


def asked(session: str, call_id: str, expires_in: float = 120) -> ApprovalRequested:
    call = ToolCallInfo(call_id=call_id, name="publish", arguments="{}")
    return ApprovalRequested(session=session, agent="publisher", calls=[call],
                             expires_at=utc_now() + timedelta(seconds=expires_in))  # fmt: skip


def entry(interrupt: str, approved: bool = True) -> ResumeEntry:
    return ResumeEntry(interrupt_id=interrupt, status="resolved", payload={"approved": approved})


def test_an_interrupt_id_names_its_session_and_a_bare_one_the_newest() -> None:
    assert interrupt_id(SECOND, "call_1") == "t-9.t2:call_1"
    assert split_interrupt_id("t-9:call_1", SECOND) == (FIRST, "call_1")
    assert split_interrupt_id("call_1", SECOND) == (SECOND, "call_1")


def test_the_same_question_id_in_two_sessions_is_answered_in_its_own() -> None:
    """Both sessions' models called their publish ``call_1``: the first's was approved and
    its session ended; the second's waits. Only the second's id answers it."""
    first = ledger([
        asked(FIRST, "call_1"),
        ApprovalDecided(session=FIRST, agent="publisher", call_id="call_1", approved=True),
        SessionFinished(session=FIRST, agent="lead", status="completed"),
    ])  # fmt: skip
    second = ledger([asked(SECOND, "call_1")])
    ledgers = {FIRST: first, SECOND: second}
    entries = [entry(f"{FIRST}:call_1", approved=False), entry(f"{SECOND}:call_1")]
    answers, ignored = read_resume(entries, ledgers, SECOND, live=True)
    assert [(a.question.id, a.question.agent) for a in answers] == [("call_1", "publisher")]
    assert [(i.interrupt_id, i.expired) for i in ignored] == [(f"{FIRST}:call_1", False)]
    assert f"already answered in session {FIRST} (approved)" in ignored[0].why


def test_an_entry_that_answers_nothing_says_how_its_question_ended() -> None:
    first = ledger([
        asked(FIRST, "open"),
        asked(FIRST, "cancelled"),
        ApprovalDecided(session=FIRST, agent="publisher", call_id="cancelled", approved=False,
                        reason="withdrawn: the agent's turn was cancelled before anyone answered"),
        SessionFinished(session=FIRST, agent="lead", status="cancelled"),
    ])  # fmt: skip
    entries = [entry(f"{FIRST}:open"), entry(f"{FIRST}:cancelled"), entry(f"{FIRST}:never"),
               entry("elsewhere:x")]  # fmt: skip
    answers, ignored = read_resume(entries, {FIRST: first}, FIRST, live=False)
    assert answers == []
    whys = [i.why for i in ignored]
    assert f"closed unanswered: session {FIRST} has ended" in whys[0]
    assert "was closed: its agent stopped waiting" in whys[1]
    assert f"no such question was asked in session {FIRST}" in whys[2]
    assert "session elsewhere is not of this thread" in whys[3]
    assert not any(i.expired for i in ignored)


def test_an_expired_question_is_reported_expired_in_either_order_with_the_sessions_end() -> None:
    """The approval expired; the session then ended (the agent went on without it). A late
    answer is reported as an expiry — from the logged decline at the timeout, and also where
    the session ended before that decline was logged."""
    requested = asked(FIRST, "late", expires_in=-1)
    assert requested.expires_at is not None
    decided = ApprovalDecided(session=FIRST, agent="publisher", call_id="late", approved=False,
                              reason="no answer within 120 s", ts=requested.expires_at)  # fmt: skip
    ended = SessionFinished(session=FIRST, agent="lead", status="completed")
    orders: list[list[Event]] = [
        [requested, decided, ended],
        [requested, ended],
        [requested, decided],
    ]
    for events in orders:
        for live in (True, False):
            _, [ignored] = read_resume([entry("late")], {FIRST: ledger(events)}, FIRST, live=live)
            assert ignored.expired and "expired" in ignored.why, (events, live)

"""How the plain view and the closing line word things: each said once, and readably."""

from __future__ import annotations

import io

import pytest

from baton.bus.events import ApprovalDecided, SessionFinished, SessionStarted
from baton.cli.render import TASK_SHOWN, PlainRenderer, describe, ending_line
from baton.session.view import LEAD_NAME, SessionView

S = "s-words"


@pytest.mark.parametrize(
    ("approved", "reason", "said"),
    [
        (True, "", "· call_1 approved"),
        (True, "approved", "· call_1 approved"),
        (True, "approved by policy (approve=auto)", "· call_1 approved by policy (approve=auto)"),
        (False, "declined by policy (approve=deny)", "· call_1 declined by policy (approve=deny)"),
        (False, "no answer within 120 s", "· call_1 declined: no answer within 120 s"),
        (False, "declined", "· call_1 declined"),
    ],
)
def test_an_approvals_verdict_is_said_once(approved: bool, reason: str, said: str) -> None:
    event = ApprovalDecided(
        session=S, agent="publisher", call_id="call_1", approved=approved, reason=reason
    )
    assert describe(event) == said
    view = SessionView()
    view.apply(event)
    assert view.decisions == [f"publisher: call_1 {said.removeprefix('· call_1 ')}"]


def test_a_finished_sessions_status_reads_as_words() -> None:
    event = SessionFinished(session=S, agent=LEAD_NAME, status="timed_out")
    assert describe(event) == f"── session {S} timed out"


@pytest.mark.parametrize(
    ("status", "reason", "line"),
    [
        ("timed_out", "the session timed out after 5 s", "baton run: session timed out after 5 s"),
        ("timed_out", "timed out", "baton run: session timed out"),
        ("failed", "context too long", "baton run: session failed: context too long"),
        ("cancelled", "cancelled", "baton run: session cancelled"),
    ],
)
def test_the_closing_line_says_the_status_once(status: str, reason: str, line: str) -> None:
    assert ending_line("baton run", status, reason) == line


def test_a_long_task_is_cut_in_the_header_with_a_marker() -> None:
    task = "paint a fox " * 10_000  # 120 KB
    out = io.StringIO()
    renderer = PlainRenderer(out)
    renderer.show(SessionStarted(session=S, agent=LEAD_NAME, task=task, model="m", offline=True))
    header = out.getvalue()
    assert header.count("\n") == 1 and len(header) < TASK_SHOWN + 120
    assert header.rstrip().endswith(f"… [{len(task):,} characters in all]")


def test_a_short_task_is_shown_whole() -> None:
    event = SessionStarted(session=S, agent=LEAD_NAME, task="paint a fox", model="m", offline=True)
    assert describe(event).endswith(": paint a fox")

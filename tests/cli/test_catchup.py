"""Where a session joined in mid-course stands (``baton.cli.catchup``), as a pure fold: which of
its logged events still hold, and what the plain and JSON views show of them first."""

from __future__ import annotations

import io
import json

from baton.bus.events import (
    AgentExited,
    AgentProgress,
    AgentSpawned,
    ApprovalDecided,
    ApprovalRequested,
    Event,
    SessionStarted,
    TextDelta,
    ToolCallInfo,
)
from baton.cli.catchup import approve_line, standing_of
from baton.cli.render import JsonRenderer, PlainRenderer

S = "s-1"


def call(call_id: str, name: str = "publish") -> ToolCallInfo:
    return ToolCallInfo(call_id=call_id, name=name, arguments='{"text": "hi"}')


HISTORY: list[Event] = [
    SessionStarted(session=S, agent="lead", task="paint and publish", model="m"),
    TextDelta(session=S, agent="lead", text="Delegating."),
    AgentSpawned(session=S, agent="painter", profile="painter"),
    AgentSpawned(session=S, agent="publisher", profile="publisher"),
    AgentSpawned(session=S, agent="publisher", profile="publisher", worker="w1/r1"),
    AgentProgress(session=S, agent="painter", content="round 1"),
    AgentProgress(session=S, agent="painter", content="painting the fox"),
    ApprovalRequested(session=S, agent="publisher", calls=[call("c1"), call("c2")]),
    ApprovalDecided(session=S, agent="publisher", call_id="c1", approved=True),
    AgentSpawned(session=S, agent="gone", profile="painter"),
    AgentExited(session=S, agent="gone", reason="finished"),
    ApprovalRequested(session=S, agent="lead", calls=[call("c9", "deploy")]),
]


def test_the_present_is_the_start_the_running_agents_and_what_waits() -> None:
    standing = standing_of(HISTORY)
    kinds = [(type(e).__name__, e.agent) for e in standing.present]
    assert kinds == [
        ("SessionStarted", "lead"),
        ("AgentSpawned", "painter"),
        ("AgentSpawned", "publisher"),  # its latest spawn only (the worker's)
        ("AgentProgress", "painter"),  # its latest progress only
        ("ApprovalRequested", "publisher"),
        ("ApprovalRequested", "lead"),
    ], kinds
    assert standing.present[2] is HISTORY[4]
    assert standing.present[3] is HISTORY[6]
    waiting = {(r.agent, tuple(c.call_id for c in r.calls)) for r in standing.waiting}
    assert waiting == {("publisher", ("c2",)), ("lead", ("c9",))}  # c1 was decided
    assert standing.view.lead_text == "Delegating."  # the whole fold, for the live view


def test_a_call_asked_again_waits_once_where_it_was_last_asked() -> None:
    again = ApprovalRequested(session=S, agent="publisher", calls=[call("c2")])
    standing = standing_of([*HISTORY, again], with_start=False)
    publisher = [r for r in standing.waiting if r.agent == "publisher"]
    assert publisher == [again]
    assert not any(isinstance(e, SessionStarted) for e in standing.present)


def test_a_session_with_nothing_running_or_waiting_is_its_start_alone() -> None:
    done = [HISTORY[0], *HISTORY[9:11]]
    assert standing_of(done).present == [HISTORY[0]]
    assert standing_of([]).present == []


def test_the_plain_view_shows_the_present_and_the_json_view_the_events() -> None:
    standing = standing_of(HISTORY)
    plain_out, json_out = io.StringIO(), io.StringIO()
    plain, as_json = PlainRenderer(plain_out), JsonRenderer(json_out)
    plain.join(HISTORY, standing.present)
    as_json.join(HISTORY, standing.present)
    assert plain_out.getvalue().splitlines() == [
        "── session s-1 (m): paint and publish",
        "· painter spawned (profile painter)",
        "· publisher spawned (profile publisher)",
        "· painter: painting the fox",
        '? publisher asks approval for publish({"text": "hi"}) [c2]',
        '? lead asks approval for deploy({"text": "hi"}) [c9]',
    ]
    dumped = [json.loads(line) for line in json_out.getvalue().splitlines()]
    assert [e["type"] for e in dumped] == [e.type for e in standing.present]
    for renderer in (plain, as_json):  # the whole session is folded, not just the present
        assert set(renderer.view.agents) == {"painter", "publisher", "gone"}
        assert set(renderer.view.pending) == {("publisher", "c2"), ("lead", "c9")}


def test_the_approve_line_names_the_session_and_the_call() -> None:
    line = approve_line("baton watch", S, "publisher", call("c2"))
    assert line.startswith("baton watch: publisher waits for approval of publish: ")
    assert "`baton approve s-1 c2 --yes|--no`" in line and "\n" not in line


def test_a_question_for_a_file_holds_until_it_is_answered() -> None:
    from datetime import timedelta

    from baton.bus.events import QuestionAnswered, QuestionAsked, utc_now

    def asked(qid: str) -> QuestionAsked:
        expires_at = utc_now() + timedelta(minutes=3)
        return QuestionAsked(session=S, agent="reviewer", question_id=qid, kind="upload",
                             call_id=f"c-{qid}", expires_at=expires_at)  # fmt: skip

    history: list[Event] = [
        *HISTORY[:3],
        asked("q1"),
        asked("q2"),
        QuestionAnswered(session=S, agent="reviewer", question_id="q1", outcome="cancelled"),
    ]
    standing = standing_of(history)
    assert [q.question_id for q in standing.asking] == ["q2"]
    assert history[4] in standing.present and history[3] not in standing.present

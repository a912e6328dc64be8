"""One fold of a session's events (``baton.view``), read by the terminal views and the HTTP
state alike: the same events give the same facts, each view only words them its own way."""

from __future__ import annotations

import io

from baton.bus.events import (
    AgentExited,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    ApprovalDecided,
    ApprovalRequested,
    Event,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    ToolCallInfo,
)
from baton.cli.render import PlainRenderer, agent_status
from baton.lead.prompt import LEAD_NAME
from baton.server.state import StateFolder
from baton.view import LEAD_NAME as VIEW_LEAD_NAME
from baton.view import SessionView

S = "s-view"
PUBLISH = ToolCallInfo(call_id="call_1", name="publish", arguments='{"text": "hi"}')


def story() -> list[Event]:
    return [
        SessionStarted(session=S, agent=LEAD_NAME, task="paint a fox", model="m", offline=True),
        RoundStarted(session=S, agent=LEAD_NAME, round=1),
        TextDelta(session=S, agent=LEAD_NAME, text="Asking the painter."),
        AgentSpawned(session=S, agent=LEAD_NAME, profile="lead"),
        AgentSpawned(session=S, agent="painter", profile="painter", worker="w1"),
        AgentSpawned(session=S, agent="publisher", profile="publisher", worker="w1"),
        AgentProgress(session=S, agent="painter", content="sketching"),
        ApprovalRequested(session=S, agent="publisher", calls=[PUBLISH]),
        AgentResult(session=S, agent="painter", content="a fox", media_urls=["/m/fox.png"]),
        AgentExited(session=S, agent="painter", reason="finished"),
        AgentExited(session=S, agent="publisher", reason="shutdown"),
        RoundStarted(session=S, agent=LEAD_NAME, round=2),
        TextDelta(session=S, agent=LEAD_NAME, text="Done: "),
        TextDelta(session=S, agent=LEAD_NAME, text="a fox."),
        SessionFinished(
            session=S,
            agent=LEAD_NAME,
            status="completed",
            answer="a fox.",
            media_urls=["/m/fox.png"],
        ),
    ]


def test_the_fold_keeps_the_facts_every_view_needs() -> None:
    view = SessionView()
    for event in story():
        view.apply(event)
    assert (view.session, view.status, view.task, view.offline) == (
        S,
        "completed",
        "paint a fox",
        True,
    )
    assert view.lead_written == "Asking the painter.Done: a fox."
    assert view.lead_text == "Asking the painter.\nDone: a fox."  # each round on its own line
    assert list(view.agents) == ["painter", "publisher"]  # the lead is not one of its sub-agents
    painter, publisher = view.agents["painter"], view.agents["publisher"]
    assert (painter.phase, painter.exit_reason, painter.progress, painter.result) == (
        "done",
        "finished",
        "sketching",
        "a fox",
    )
    assert (publisher.phase, publisher.exit_reason) == ("spawned", "shutdown")
    assert view.pending == {("publisher", "call_1"): PUBLISH}
    assert view.media_urls == ["/m/fox.png"] and view.answer == "a fox."


def test_the_terminal_and_the_api_word_the_same_fold() -> None:
    folder = StateFolder(S)
    out = io.StringIO()
    plain = PlainRenderer(out)
    for number, event in enumerate(story()):
        folder.add(f"{number}-0", event)
        plain.show(event)
    state = folder.result()
    assert plain.view == folder.view  # one fold, whoever reads it
    assert (state.status, state.text, state.answer) == (
        "completed",
        folder.view.lead_written,
        "a fox.",
    )
    assert state.events == len(story()) and state.last_cursor == f"{len(story()) - 1}-0"
    statuses = {agent.name: agent.status for agent in state.agents}
    assert statuses == {"painter": "done", "publisher": "shutdown"}  # why it left, unless finished
    words = {name: agent_status(agent) for name, agent in plain.view.agents.items()}
    assert words == {"painter": "exited (finished)", "publisher": "exited (shutdown)"}
    assert [(p.agent, p.call_id) for p in state.pending_approvals] == [("publisher", "call_1")]


def test_a_decided_approval_leaves_the_pending_list_of_its_own_agent_only() -> None:
    view = SessionView()
    other = ToolCallInfo(call_id="call_1", name="paint", arguments="{}")
    view.apply(ApprovalRequested(session=S, agent="publisher", calls=[PUBLISH]))
    view.apply(ApprovalRequested(session=S, agent="painter", calls=[other]))
    view.apply(ApprovalDecided(session=S, agent="painter", call_id="call_1", approved=True))
    assert view.pending == {("publisher", "call_1"): PUBLISH}
    assert view.decisions == ["painter: paint approved"]


def test_an_agent_spawned_again_after_leaving_is_running_again() -> None:
    view = SessionView()
    view.apply(AgentSpawned(session=S, agent="painter", profile="painter"))
    view.apply(AgentExited(session=S, agent="painter", reason="error"))
    assert not view.agents["painter"].running
    view.apply(AgentSpawned(session=S, agent="painter", profile="painter", worker="w2"))
    assert view.agents["painter"].running and agent_status(view.agents["painter"]) == "spawned"


def test_the_view_names_the_lead_as_the_lead_does() -> None:
    assert VIEW_LEAD_NAME == LEAD_NAME

"""One fold of a session's events (``baton.session.view``), read by the terminal views and the HTTP
state alike: the same events give the same facts, each view only words them its own way."""

from __future__ import annotations

import io

from baton.bus.events import (
    AgentClaimed,
    AgentExited,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    AnswerChecked,
    ApprovalDecided,
    ApprovalRequested,
    BudgetUpdated,
    Event,
    ModelRetried,
    RoundStarted,
    SessionFinished,
    SessionStarted,
    TextDelta,
    TextRetracted,
    ToolCallInfo,
)
from baton.cli.render import PlainRenderer, agent_status
from baton.lead.prompt import LEAD_NAME
from baton.server.state import StateFolder
from baton.session.view import LEAD_NAME as VIEW_LEAD_NAME
from baton.session.view import SessionView

S = "s-view"
PUBLISH = ToolCallInfo(call_id="call_1", name="publish", arguments='{"text": "hi"}')


def story() -> list[Event]:
    return [
        SessionStarted(session=S, agent=LEAD_NAME, task="paint a fox", model="m", offline=True),
        RoundStarted(session=S, agent=LEAD_NAME, round=1),
        TextDelta(session=S, agent=LEAD_NAME, text="Asking the painter."),
        AgentSpawned(session=S, agent=LEAD_NAME, profile="lead"),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        AgentClaimed(session=S, agent="painter", profile="painter", worker="w1"),
        AgentSpawned(session=S, agent="publisher", profile="publisher"),
        AgentClaimed(session=S, agent="publisher", profile="publisher", worker="w1"),
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
    assert view.pending == {}  # it asked, then left: nobody waits on its approval any more
    assert view.decisions == []  # and nobody decided it
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
    assert state.pending_approvals == []  # the publisher left: its approval waits no more


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
    view.apply(AgentClaimed(session=S, agent="painter", profile="painter", worker="w2"))
    assert view.agents["painter"].running and agent_status(view.agents["painter"]) == "spawned"
    assert view.agents["painter"].worker == "w2"


def test_the_view_names_the_lead_as_the_lead_does() -> None:
    assert VIEW_LEAD_NAME == LEAD_NAME


def troubled_story() -> list[Event]:
    """A session whose model stumbled: a retried lead reply, a painter retry, a budget, and an
    answer that left out one picture and invented another."""
    return [
        SessionStarted(session=S, agent=LEAD_NAME, task="paint a fox", model="m"),
        RoundStarted(session=S, agent=LEAD_NAME, round=1),
        TextDelta(session=S, agent=LEAD_NAME, text="Asking the painter."),
        RoundStarted(session=S, agent=LEAD_NAME, round=2),
        TextDelta(session=S, agent=LEAD_NAME, text="```json\n{"),
        ModelRetried(
            session=S, agent=LEAD_NAME, attempt=1, reason="parse error", delay_s=0.5, model="m"
        ),
        TextRetracted(session=S, agent=LEAD_NAME, chars=9),
        BudgetUpdated(session=S, agent=LEAD_NAME, calls=3, tokens=900, max_calls=10),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        ModelRetried(session=S, agent="painter", attempt=2, reason="HTTP 500", delay_s=1.0),
        TextRetracted(session=S, agent="painter", chars=40),
        AgentResult(session=S, agent="painter", content="a fox", media_urls=["/m/fox.png"]),
        BudgetUpdated(session=S, agent="painter", calls=5, tokens=2400, max_calls=10),
        TextDelta(session=S, agent=LEAD_NAME, text="Here: https://example.com/fox.png"),
        AnswerChecked(
            session=S,
            agent=LEAD_NAME,
            missing_media=["/m/fox.png"],
            missing_items=["a heron"],
            invented_urls=["https://example.com/fox.png"],
        ),
        SessionFinished(
            session=S,
            agent=LEAD_NAME,
            status="incomplete",
            answer="Here: https://example.com/fox.png\nMedia:\n- /m/fox.png",
            media_urls=["/m/fox.png"],
            invented_urls=["https://example.com/fox.png"],
        ),
    ]


def test_the_fold_shows_retries_retractions_spend_and_the_answers_check() -> None:
    view = SessionView()
    for event in troubled_story():
        view.apply(event)
    assert view.status == "incomplete"
    # The retried reply's fence is gone; the earlier round's text is untouched.
    assert view.lead_rounds == ["Asking the painter.", "Here: https://example.com/fox.png"]
    assert view.retracted_chars == 9
    assert view.retries == 2 and view.last_retry is not None
    assert (view.last_retry.agent, view.last_retry.reason) == ("painter", "HTTP 500")
    assert view.agents["painter"].retries == 1  # the lead's retry is the session's, not a card's
    assert view.budget is not None and (view.budget.calls, view.budget.tokens) == (5, 2400)
    assert view.missing_media == ["/m/fox.png"]
    assert view.missing_items == ["a heron"]
    assert view.invented_urls == ["https://example.com/fox.png"]


def test_a_retraction_never_reaches_back_into_an_earlier_round() -> None:
    view = SessionView()
    view.apply(TextDelta(session=S, agent=LEAD_NAME, text="kept"))
    view.apply(RoundStarted(session=S, agent=LEAD_NAME, round=2))
    view.apply(TextDelta(session=S, agent=LEAD_NAME, text="cut"))
    view.apply(TextRetracted(session=S, agent=LEAD_NAME, chars=50))
    assert view.lead_written == "kept" and view.retracted_chars == 3


def test_the_api_state_carries_the_models_trouble() -> None:
    folder = StateFolder(S)
    for number, event in enumerate(troubled_story()):
        folder.add(f"{number}-0", event)
    state = folder.result()
    assert state.status == "incomplete"
    assert state.text == "Asking the painter.Here: https://example.com/fox.png"
    assert state.retries == 2 and state.last_retry is not None
    assert (state.last_retry.agent, state.last_retry.attempt) == ("painter", 2)
    assert state.budget is not None
    assert (state.budget.calls, state.budget.max_calls, state.budget.max_tokens) == (5, 10, None)
    assert state.missing_media == ["/m/fox.png"]
    assert state.missing_items == ["a heron"]
    assert state.invented_urls == ["https://example.com/fox.png"]
    assert [(a.name, a.retries) for a in state.agents] == [("painter", 1)]


def test_every_view_says_where_an_agent_runs_or_that_it_waits_for_a_worker() -> None:
    """``agent.unclaimed`` and ``agent.claimed`` folded once, worded once (describe_placement),
    and carried by the API's state: the page, the A2A task and the terminal read the same."""
    from baton.bus.events import AgentUnclaimed
    from baton.session.view import describe_placement

    folder = StateFolder(S)
    events: list[Event] = [
        AgentSpawned(session=S, agent="painter", profile="painter"),
        AgentUnclaimed(session=S, agent="painter", profile="painter", pool="gpu", waited_s=15,
                       workers=1),
        AgentSpawned(session=S, agent="writer", profile="writer"),
        AgentClaimed(session=S, agent="writer", profile="writer", worker="w-7"),
    ]  # fmt: skip
    for number, event in enumerate(events):
        folder.add(f"{number}-0", event)
    painter, writer = folder.view.agents["painter"], folder.view.agents["writer"]
    assert describe_placement(painter) == "waiting for a worker of pool gpu"
    assert describe_placement(writer) == "worker w-7"
    state = {agent.name: agent for agent in folder.result().agents}
    assert (state["painter"].worker, state["painter"].waiting_for_worker) == ("", True)
    assert (state["writer"].worker, state["writer"].waiting_for_worker) == ("w-7", False)

    folder.add("9-0", AgentClaimed(session=S, agent="painter", profile="painter", worker="w-8"))
    assert describe_placement(painter) == "worker w-8"  # claimed at last: no longer waiting
    assert not {a.name: a for a in folder.result().agents}["painter"].waiting_for_worker


def test_an_agent_no_worker_serves_is_said_to_have_been_ended_unclaimed() -> None:
    from baton.bus.events import AgentUnclaimed
    from baton.session.view import describe_placement

    view = SessionView()
    view.apply(AgentSpawned(session=S, agent="painter", profile="painter"))
    view.apply(AgentUnclaimed(session=S, agent="painter", profile="painter", pool="gpu",
                              waited_s=15, workers=0))  # fmt: skip
    view.apply(AgentExited(session=S, agent="painter", reason="error"))
    assert describe_placement(view.agents["painter"]) == "no worker of pool gpu claimed it"

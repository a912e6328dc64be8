"""The translation of a session's log into AG-UI events (baton.server.ag_ui.mapping), event by
event: ids that stay apart, invocations per delegation, text taken back, usage, what a client
already holds, and how questions end."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ag_ui.core import AssistantMessage, FunctionCall, ToolCall, ToolMessage, UserMessage

from baton.bus.events import (
    AgentExited,
    AgentProgress,
    AgentResult,
    AgentSpawned,
    ApprovalDecided,
    ApprovalRequested,
    Event,
    ModelUsage,
    RoundEnded,
    RoundStarted,
    SessionStarted,
    TextDelta,
    TextRetracted,
    ToolCalled,
    ToolCallInfo,
    ToolResulted,
    ToolResultInfo,
    utc_now,
)
from baton.server.ag_ui.holdings import Holdings
from baton.server.ag_ui.links import MARKER
from baton.server.ag_ui.mapping import Translator
from baton.server.ag_ui.state import patch, pointer

S = "s-map"
Json = dict[str, Any]


def translate(
    events: Sequence[Event],
    *,
    holdings: Holdings | None = None,
    begin_at: int = 0,
    session: str = S,
) -> tuple[Translator, list[Json]]:
    """Feed ``events`` (cursors 1, 2, ...), the run beginning before event ``begin_at``."""
    translator = Translator(session, media_url=served, holdings=holdings)
    out: list[Json] = []
    for number, event in enumerate(events):
        if number == begin_at:
            out += [e.model_dump(by_alias=True) for e in translator.begin_run()]
        out += [e.model_dump(by_alias=True) for e in translator.feed(str(number + 1), event)]
    return translator, out


def served(url: str) -> str:
    """The server's URL of a file of its media directory (``/m/``), anything else as it is."""
    return url.replace("file:///m/", "http://h/media/", 1)


def call(agent: str, call_id: str, name: str, arguments: str = "{}") -> ToolCalled:
    return ToolCalled(session=S, agent=agent, call=ToolCallInfo(call_id=call_id, name=name,
                                                                 arguments=arguments))  # fmt: skip


def result(agent: str, call_id: str, name: str, content: str, **more: Any) -> ToolResulted:
    info = ToolResultInfo(call_id=call_id, name=name, content=content, **more)
    return ToolResulted(session=S, agent=agent, result=info)


def send(call_id: str, to: str, kind: str = "task") -> ToolCalled:
    return call(
        "lead", call_id, "send_message", f'{{"to": "{to}", "content": "x", "type": "{kind}"}}'
    )


def of(out: list[Json], kind: str) -> list[Json]:
    return [event for event in out if event["type"] == kind]


START: list[Event] = [
    SessionStarted(session=S, agent="lead", task="t"),
    RoundStarted(session=S, agent="lead", round=1),
]


def test_call_ids_two_agents_share_stay_apart_and_the_approval_names_the_right_one() -> None:
    events: list[Event] = [
        *START,
        send("c1", "painter"),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        send("c2", "painter"),
        AgentSpawned(session=S, agent="painter-2", profile="painter"),
        call("painter", "call_res_4", "send_message"),
        call("painter-2", "call_res_4", "publish"),
        ApprovalRequested(session=S, agent="painter-2", calls=[ToolCallInfo(
            call_id="call_res_4", name="publish", arguments="{}")],
            expires_at=utc_now() + timedelta(minutes=2)),
    ]  # fmt: skip
    translator, out = translate(events)
    ids = [e["toolCallId"] for e in of(out, "TOOL_CALL_START") if e.get("subagentRunId")]
    assert ids == [f"{S}:painter.call_res_4", f"{S}:painter-2.call_res_4"]
    started = {e["name"]: e for e in of(out, "SUBAGENT_STARTED")}
    assert started["painter"]["parentToolCallId"] == f"{S}:c1"
    assert started["painter-2"]["parentToolCallId"] == f"{S}:c2"
    _, interrupts = translator.suspend(translator.open_questions())
    [interrupt] = interrupts
    assert interrupt.tool_call_id == f"{S}:painter-2.call_res_4"
    assert interrupt.subagent_run_id == started["painter-2"]["subagentRunId"]


def test_the_sessions_of_a_thread_never_share_a_tool_call_id_and_a_replay_keeps_them() -> None:
    """A thread's next session (``<thread>.t2``) runs a model that numbers its calls anew: the
    same call ids, lead's and sub-agents', must not name the first session's calls again (a
    client holding the thread would merge the two), and a replay names each call alike."""

    def log(session: str) -> list[Event]:
        return [
            SessionStarted(session=session, agent="lead", task="t"),
            RoundStarted(session=session, agent="lead", round=1),
            call("lead", "call_answer_5", "answer"),
            result("lead", "call_answer_5", "answer", "ok"),
            send("c1", "painter"),
            AgentSpawned(session=session, agent="painter", profile="painter"),
            call("painter", "call_res_4", "generate_image"),
            result("painter", "call_res_4", "generate_image", "done"),
        ]

    def ids(out: list[Json]) -> list[str]:
        return [e["toolCallId"] for e in of(out, "TOOL_CALL_START")] + [
            e["messageId"] for e in of(out, "TOOL_CALL_RESULT")
        ]

    _, first = translate(log(S), session=S)
    _, later = translate(log(f"{S}.t2"), session=f"{S}.t2")
    _, replayed = translate(log(f"{S}.t2"), session=f"{S}.t2")
    assert len(ids(first)) == 5 and not set(ids(first)) & set(ids(later))
    assert ids(replayed) == ids(later)


def test_a_follow_up_to_a_living_agent_is_a_new_invocation_and_a_refused_send_is_none() -> None:
    events: list[Event] = [
        *START,
        send("c1", "writer"),
        AgentSpawned(session=S, agent="writer", profile="writer"),
        result("lead", "c1", "send_message", "Started writer, a new writer agent, on this task"),
        send("c2", "writer", "message"),
        result("lead", "c2", "send_message", "Sent to writer (profile writer)"),
        send("c3", "writer", "message"),
        result("lead", "c3", "send_message", "Did not send: you already sent 2 messages"),
        AgentProgress(session=S, agent="writer", content="round 2"),
        AgentResult(session=S, agent="writer", content="done", media_urls=["file:///m/a.png"]),
    ]
    _, out = translate(events)
    started = of(out, "SUBAGENT_STARTED")
    assert [(e["name"], e["parentToolCallId"]) for e in started] == [
        ("writer", f"{S}:c1"),
        ("writer", f"{S}:c2"),
    ]
    assert started[0]["subagentRunId"] != started[1]["subagentRunId"]
    finished = of(out, "SUBAGENT_FINISHED")
    assert [e["subagentRunId"] for e in finished] == [e["subagentRunId"] for e in started]
    assert finished[-1]["result"] == {"agent": "writer", "content": "done",
                                      "mediaUrls": ["http://h/media/a.png"]}  # fmt: skip
    progress = of(out, "ACTIVITY_DELTA")[-1]  # the newest invocation carries the agent's work
    assert progress["subagentRunId"] == started[1]["subagentRunId"]


def test_a_message_belongs_to_one_invocation_when_a_follow_up_reaches_its_agent_mid_round() -> None:
    """The lead's follow-up reaches the writer while its round is streaming: the writer's work
    belongs to the new invocation from then on, and no message (nor its tool calls) changes
    owner between its start and its end."""
    events: list[Event] = [
        *START,
        send("c1", "writer"),
        AgentSpawned(session=S, agent="writer", profile="writer"),
        result("lead", "c1", "send_message", "Started writer, a new writer agent, on this task"),
        RoundStarted(session=S, agent="writer", round=1),
        TextDelta(session=S, agent="writer", text="Drafting"),
        send("c2", "writer", "message"),
        result("lead", "c2", "send_message", "Sent to writer (profile writer)"),
        TextDelta(session=S, agent="writer", text=" the poem"),
        call("writer", "w1", "publish"),
        RoundEnded(session=S, agent="writer", round=1),
    ]
    _, out = translate(events)
    first, second = (e["subagentRunId"] for e in of(out, "SUBAGENT_STARTED"))
    owners: dict[str, set[str | None]] = {}
    for event in out:
        if event["type"].startswith("TEXT_MESSAGE"):
            owners.setdefault(event["messageId"], set()).add(event.get("subagentRunId"))
    assert all(len(found) == 1 for found in owners.values()), owners
    said = {e["delta"]: e["subagentRunId"] for e in of(out, "TEXT_MESSAGE_CONTENT")}
    assert said == {"Drafting": first, " the poem": second}
    [tool] = [e for e in of(out, "TOOL_CALL_START") if e.get("subagentRunId")]
    assert owners[tool["parentMessageId"]] == {tool["subagentRunId"]} == {second}
    opened = [e["messageId"] for e in of(out, "TEXT_MESSAGE_START")]
    assert sorted(opened) == sorted(e["messageId"] for e in of(out, "TEXT_MESSAGE_END"))


def test_text_taken_back_ends_its_message_and_the_retry_is_a_new_one() -> None:
    events: list[Event] = [
        *START,
        TextDelta(session=S, agent="lead", text="Hello wor"),
        TextRetracted(session=S, agent="lead", chars=9),
        TextDelta(session=S, agent="lead", text="Hi"),
        RoundEnded(session=S, agent="lead", round=1),
    ]
    _, out = translate(events)
    opened = [e["messageId"] for e in of(out, "TEXT_MESSAGE_START")]
    closed = [e["messageId"] for e in of(out, "TEXT_MESSAGE_END")]
    assert len(opened) == 2 and opened == closed and opened[0] != opened[1]
    [void] = of(out, "CUSTOM")
    assert void["name"] == "baton.text.retracted"
    assert void["value"] == {"messageId": opened[0], "chars": 9, "why": ""}


def test_a_runs_usage_is_its_own_calls_per_model_sub_agents_included() -> None:
    def usage(agent: str, model: str, i: int, o: int) -> ModelUsage:
        return ModelUsage(session=S, agent=agent, model=model, input_tokens=i, output_tokens=o,
                          total_tokens=i + o)  # fmt: skip

    events: list[Event] = [
        *START,
        usage("lead", "big", 100, 10),  # before the run began: the previous run's
        usage("lead", "big", 50, 5),
        usage("painter", "small", 7, 3),
        usage("writer", "small", 1, 1),
    ]
    translator, _ = translate(events, begin_at=3)
    reported = translator.usage()
    assert reported is not None
    assert [u.model_dump(by_alias=True, exclude_none=True) for u in reported] == [
        {"model": "big", "inputTokens": 50, "outputTokens": 5, "totalTokens": 55},
        {"model": "small", "inputTokens": 8, "outputTokens": 4, "totalTokens": 12},
    ]


def test_what_the_client_holds_is_not_sent_again() -> None:
    message = f"{S}.lead.2"
    holdings = Holdings.of([
        UserMessage(id="u1", content="t"),
        AssistantMessage(id=message, content="Hello", tool_calls=[ToolCall(
            id=f"{S}:c1", function=FunctionCall(name="answer", arguments='{"a": 1}'))]),
        ToolMessage(id=f"{S}:c1.result", tool_call_id=f"{S}:c1", content="ok"),
    ])  # fmt: skip
    events: list[Event] = [
        *START,
        TextDelta(session=S, agent="lead", text="Hel"),
        TextDelta(session=S, agent="lead", text="lo wor"),
        TextDelta(session=S, agent="lead", text="ld"),
        call("lead", "c1", "answer", '{"a": 1}'),
        result("lead", "c1", "answer", "ok"),
    ]
    translator, out = translate(events, holdings=holdings)
    assert "".join(e["delta"] for e in of(out, "TEXT_MESSAGE_CONTENT")) == " world"
    assert of(out, "TOOL_CALL_START") == [] and of(out, "TOOL_CALL_RESULT") == []
    assert translator.held_through == "3" and translator.missing_from == "4"


def test_text_names_media_by_their_served_urls_even_split_across_pieces() -> None:
    events: list[Event] = [
        *START,
        TextDelta(session=S, agent="lead", text="Here: file:///m/s/a"),
        TextDelta(session=S, agent="lead", text=".png, and fi"),
        TextDelta(session=S, agent="lead", text="le:///etc/passwd. Then file:///m/s/b.png"),
        call("lead", "c1", "answer", '{"text": "file:///m/s/a.png"}'),
        result("lead", "c1", "answer", "saved file:///tmp/elsewhere.txt"),
        RoundEnded(session=S, agent="lead", round=1),
    ]
    _, out = translate(events)
    deltas = [e["delta"] for e in of(out, "TEXT_MESSAGE_CONTENT")]
    assert all("file:" not in delta and not delta.endswith("fi") for delta in deltas)
    assert "".join(deltas) == (
        f"Here: http://h/media/s/a.png, and {MARKER}. Then http://h/media/s/b.png"
    )
    assert of(out, "TOOL_CALL_ARGS")[0]["delta"] == '{"text": "http://h/media/s/a.png"}'
    assert of(out, "TOOL_CALL_RESULT")[0]["content"] == f"saved {MARKER}"
    ends = [i for i, e in enumerate(out) if e["type"] == "TEXT_MESSAGE_END"]
    last = max(i for i, e in enumerate(out) if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert ends and last < ends[0]  # the URL the text ended with went out before its end


def test_what_the_client_holds_is_counted_in_the_text_it_was_sent() -> None:
    message = f"{S}.lead.2"
    sent = "Here: http://h/media/s/a.png"
    holdings = Holdings.of([
        UserMessage(id="u1", content="t"),
        AssistantMessage(id=message, content=sent, tool_calls=[ToolCall(
            id=f"{S}:c1", function=FunctionCall(
                name="answer", arguments='{"u": "http://h/media/s/a.png?token=old"}'))]),
    ])  # fmt: skip
    events: list[Event] = [
        *START,
        TextDelta(session=S, agent="lead", text="Here: file:///m/s/a.png"),
        TextDelta(session=S, agent="lead", text=" and more"),
        call("lead", "c1", "answer", '{"u": "file:///m/s/a.png"}'),
    ]
    translator, out = translate(events, holdings=holdings)
    assert "".join(e["delta"] for e in of(out, "TEXT_MESSAGE_CONTENT")) == " and more"
    assert of(out, "TOOL_CALL_START") == []  # the same call, its link's token aside
    assert translator.held_through == "3" and translator.missing_from == "4"


def test_an_agent_that_leaves_without_a_result_is_a_sub_agent_error() -> None:
    events: list[Event] = [
        *START,
        send("c1", "painter"),
        AgentSpawned(session=S, agent="painter", profile="painter"),
        AgentExited(session=S, agent="painter", reason="budget"),
    ]
    _, out = translate(events)
    [error] = of(out, "SUBAGENT_ERROR")
    assert error["code"] == "budget" and "without a result" in error["message"]


def test_an_approval_nobody_answered_in_time_ends_expired_not_declined() -> None:
    asked_at = utc_now()
    calls = [ToolCallInfo(call_id=c, name="publish", arguments="{}") for c in ("a", "b", "c")]
    requested = ApprovalRequested(session=S, agent="lead", calls=calls,
                                  expires_at=asked_at + timedelta(seconds=1))  # fmt: skip
    late = asked_at + timedelta(seconds=2)
    events: list[Event] = [
        *START,
        requested,
        ApprovalDecided(session=S, agent="lead", call_id="a", approved=False, reason="no",
                        ts=asked_at),  # a person said no in time
        ApprovalDecided(session=S, agent="lead", call_id="b", approved=False,
                        reason="no answer within 1 s", ts=late),
        ApprovalDecided(session=S, agent="lead", call_id="c", approved=False, policy="deny",
                        reason="denied by policy", ts=late),
    ]  # fmt: skip
    _, out = translate(events)
    outcomes = {e["value"]["interruptId"]: e["value"]["outcome"] for e in of(out, "CUSTOM")}
    assert outcomes == {f"{S}:a": "declined", f"{S}:b": "expired", f"{S}:c": "declined"}


def test_state_patches_replace_what_changed_one_sub_agent_at_a_time() -> None:
    old = {"status": "running", "subagents": {"a/b": {"x": 1}, "gone": {}}, "media": []}
    new = {"status": "running", "subagents": {"a/b": {"x": 2}, "new~1": {}}, "media": ["u"]}
    assert patch(old, new) == [
        {"op": "replace", "path": "/subagents/a~1b", "value": {"x": 2}},
        {"op": "add", "path": "/subagents/new~01", "value": {}},
        {"op": "remove", "path": "/subagents/gone"},
        {"op": "replace", "path": "/media", "value": ["u"]},
    ]
    assert pointer("a~b", "c/d") == "/a~0b/c~1d"
    assert patch(new, new) == []

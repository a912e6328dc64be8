"""``POST /ag-ui`` driven by the real ``@ag-ui/client`` 1.0.0 (``HttpAgent.runAgent``, whose
verifier throws on any protocol violation), under Node, against ``baton serve`` on the offline
model: one Node process runs every case (``tests/clients/ag-ui/cases.mjs``) and the tests below
assert on what it saw.

The servers: one on the in-process bus with a token (the built-in profiles and the surveyors,
whose tools hold), and one whose model fails every request.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from baton.bus.memory import MemoryBus
from baton.llm import ModelSettings, ScriptedServer
from baton.llm.script import server_error
from baton.server import BatonServer, ServerConfig
from tests.server.ag_ui_helpers import (
    Json,
    case,
    every_event,
    of_type,
    parse_all,
    profiles,
    run_cases,
    terminal,
    types,
)

pytestmark = pytest.mark.browser  # Node runs the client (the tier of browser-side code)

TOKEN = "t0ken-for-the-ag-ui-tests-0123456789"
CASES = [
    "paint_and_follow_up", "approve", "decline", "upload", "cancel", "failing_model",
    "bad_bodies", "drop_and_resume", "abort_and_rejoin", "docs_front_end",
]  # fmt: skip


async def _serve_and_run(tmp: Path) -> Json:
    failing = ScriptedServer(responder=lambda body: server_error(500))
    broken = ModelSettings(model="scripted-broken", max_retries=0)
    async with MemoryBus() as bus, MemoryBus() as other, failing.serve() as model:
        main_config = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp / "media", token=TOKEN)
        failing_config = ServerConfig(
            port=0,
            bus_url=other.url,
            media_dir=tmp / "media-failing",
            model=broken.model_copy(update={"base_url": model.base_url}),
        )
        async with (
            BatonServer(main_config, bus=bus, profiles=profiles(tmp)) as main,
            BatonServer(failing_config, bus=other, profiles=profiles(tmp)) as failing_server,
        ):
            settings = {
                "servers": {
                    "main": {"url": main.url, "token": TOKEN},
                    "failing": {"url": failing_server.url, "token": None},
                },
                "cases": CASES,
                "release": str(tmp / "release"),
            }
            results: Json = await anyio.to_thread.run_sync(run_cases, settings)
            results["_urls"] = {"main": main.url}
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Json:
    tmp = tmp_path_factory.mktemp("ag-ui")
    with pytest.MonkeyPatch.context() as patch:  # the surveyors' hold waits for this file
        patch.setenv("BATON_TEST_RELEASE", str(tmp / "release"))
        return anyio.run(_serve_and_run, tmp)


def _clean(run: Json) -> None:
    """The client verified every event and threw nothing."""
    assert run["error"] is None, run["error"]
    assert types(run)[0] == "RUN_STARTED"


def test_every_event_the_client_saw_is_an_ag_ui_1_0_event(results: Json) -> None:
    for name in CASES:
        case(results, name)
    assert parse_all(every_event(results)) > 200


def test_a_run_starts_with_protocol_1_0(results: Json) -> None:
    first = case(results, "paint_and_follow_up")["first"]
    _clean(first)
    started = first["events"][0]
    assert started["protocolVersion"] == "1.0"
    assert started["threadId"].startswith("paint-") and started["runId"]


def test_two_paintings_are_two_invocations_started_and_closed(results: Json) -> None:
    first = case(results, "paint_and_follow_up")["first"]
    _clean(first)
    started = of_type(first, "SUBAGENT_STARTED")
    finished = of_type(first, "SUBAGENT_FINISHED")
    assert {e["name"] for e in started} == {"painter", "painter-2"}
    assert len({e["subagentRunId"] for e in started}) == 2
    assert {e["subagentRunId"] for e in finished} == {e["subagentRunId"] for e in started}
    calls = {e["toolCallId"]: e for e in of_type(first, "TOOL_CALL_START")}
    for event in started:  # each tied to the lead's send_message that made it
        parent = calls[event["parentToolCallId"]]
        assert parent["toolCallName"] == "send_message" and "subagentRunId" not in parent
    for event in finished:
        assert "outcome" not in event or event["outcome"]["type"] == "success"
        urls = event["result"]["mediaUrls"]
        assert len(urls) == 1 and urls[0].split("?")[0].endswith(".png")
    sub_calls = [e for e in calls.values() if e.get("subagentRunId")]
    assert {e["toolCallName"] for e in sub_calls} >= {"generate_image"}
    assert terminal(first)["type"] == "RUN_FINISHED"
    assert "outcome" not in terminal(first) or terminal(first)["outcome"]["type"] == "success"


def test_the_leads_answer_streams_as_text_and_ends_the_run_with_it(results: Json) -> None:
    first = case(results, "paint_and_follow_up")["first"]
    lead_text = "".join(
        e["delta"] for e in of_type(first, "TEXT_MESSAGE_CONTENT") if "subagentRunId" not in e
    )
    answer = terminal(first)["result"]["answer"]
    assert answer and answer in lead_text
    assert len(terminal(first)["result"]["mediaUrls"]) == 2
    assert terminal(first)["usage"] and all(u["totalTokens"] > 0 for u in terminal(first)["usage"])


def test_the_pictures_open_in_a_browser_by_their_url_alone(results: Json) -> None:
    found = case(results, "paint_and_follow_up")
    pictures = found["pictures"]
    assert len(pictures) == 3  # fox, heron, then the follow-up's swan
    main = results["_urls"]["main"]
    for picture in pictures:
        assert picture["url"].startswith(f"{main}/media/") and "token=" in picture["url"]
        assert TOKEN not in picture["url"]  # a read token of that session, never the admin one
        assert (picture["status"], picture["type"], picture["png"]) == (200, "image/png", True)


def test_no_event_names_a_path_of_the_server(results: Json) -> None:
    """The tools report ``file://`` URLs, and the agents repeat them in their text, their tool
    calls, results and answer: each reaches the client as the URL the server serves it at."""
    seen = json.dumps(list(every_event(results)))
    assert "file://" not in seen
    first = case(results, "paint_and_follow_up")["first"]
    lead_text = "".join(
        e["delta"] for e in of_type(first, "TEXT_MESSAGE_CONTENT") if "subagentRunId" not in e
    )
    main = results["_urls"]["main"]
    linked = [line for line in lead_text.splitlines() if f"{main}/media/" in line]
    assert len(linked) == 2 and all("token=" in line and TOKEN not in line for line in linked)
    assert f"{main}/media/" in terminal(first)["result"]["answer"]


def test_state_shows_the_sub_agents_and_their_media(results: Json) -> None:
    first = case(results, "paint_and_follow_up")["first"]
    snapshot = of_type(first, "STATE_SNAPSHOT")[0]["snapshot"]
    assert snapshot["session"] == first["events"][0]["threadId"]
    final = case(results, "paint_and_follow_up")["messages"]
    assert final  # the client kept the conversation
    deltas = [op for e in of_type(first, "STATE_DELTA") for op in e["delta"]]
    paths = {op["path"] for op in deltas}
    assert {"/subagents/painter", "/subagents/painter-2", "/status", "/media"} <= paths


def test_a_follow_up_on_the_same_thread_carries_on_the_conversation(results: Json) -> None:
    found = case(results, "paint_and_follow_up")
    second = found["second"]
    _clean(second)
    assert second["events"][0]["threadId"] == found["first"]["events"][0]["threadId"]
    assert terminal(second)["type"] == "RUN_FINISHED"
    assert "swan" in terminal(second)["result"]["answer"]
    assert [e["name"] for e in of_type(second, "SUBAGENT_STARTED")] == ["painter"]
    first_ids = {e["subagentRunId"] for e in of_type(found["first"], "SUBAGENT_STARTED")}
    assert of_type(second, "SUBAGENT_STARTED")[0]["subagentRunId"] not in first_ids


def _tool_calls(messages: list[Json]) -> list[str]:
    return [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("toolCalls") or ()]


def test_the_sessions_of_a_thread_never_share_a_tool_call_id(results: Json) -> None:
    """The follow-up ran in the thread's next session, whose model numbers its calls anew: each
    call is still its own in the client's history, and the thread replays as one clean run."""
    found = case(results, "paint_and_follow_up")
    started = [
        e["toolCallId"] for run in (found["first"], found["second"])
        for e in of_type(run, "TOOL_CALL_START")
    ]  # fmt: skip
    assert len(started) == len(set(started))
    held = _tool_calls(found["messages"])
    assert sorted(held) == sorted(started)
    results_held = [m["id"] for m in found["messages"] if m["role"] == "tool"]
    assert len(results_held) == len(set(results_held)) == len(started)
    replay = found["replay"]
    _clean(replay)
    assert terminal(replay)["type"] == "RUN_FINISHED"
    assert sorted(_tool_calls(found["replayed"])) == sorted(started)


def _interrupt(run: Json) -> Json:
    finished = terminal(run)
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    return interrupt  # type: ignore[no-any-return]


def test_publishing_asks_for_approval_as_an_interrupt(results: Json) -> None:
    asked = case(results, "approve")["asked"]
    _clean(asked)
    interrupt = _interrupt(asked)
    assert interrupt["reason"] == "tool_approval"
    assert "publish" in interrupt["message"]
    schema = interrupt["responseSchema"]
    assert schema["properties"]["approved"]["type"] == "boolean"
    assert schema["properties"]["reason"]["type"] == "string"
    assert datetime.fromisoformat(interrupt["expiresAt"]) > datetime.now(UTC)
    [publisher] = of_type(asked, "SUBAGENT_STARTED")
    assert interrupt["subagentRunId"] == publisher["subagentRunId"]
    gated = [
        e for e in of_type(asked, "TOOL_CALL_START") if e["toolCallId"] == interrupt["toolCallId"]
    ]
    assert gated and gated[0]["toolCallName"] == "publish"
    assert gated[0]["subagentRunId"] == publisher["subagentRunId"]
    [suspended] = of_type(asked, "SUBAGENT_FINISHED")
    assert suspended["outcome"] == {"type": "suspended", "interruptIds": [interrupt["id"]]}
    assert case(results, "approve")["asked"]["pendingInterrupts"][0]["id"] == interrupt["id"]


def test_a_resume_that_does_not_fit_is_refused_and_answers_nothing(results: Json) -> None:
    bad = case(results, "approve")["bad"]
    assert bad["status"] == 422 and bad["contentType"] == "application/json"
    detail = json.loads(bad["text"])["detail"]
    assert "payload.approved" in detail and "nothing was answered" in detail


def test_a_resume_that_approves_runs_the_call_and_the_session_goes_on(results: Json) -> None:
    found = case(results, "approve")
    answered = found["answered"]
    _clean(answered)
    interrupt = _interrupt(found["asked"])
    [resolved] = [e for e in of_type(answered, "CUSTOM") if e["name"] == "baton.interrupt.resolved"]
    assert resolved["value"]["interruptId"] == interrupt["id"]
    assert resolved["value"]["outcome"] == "approved"
    [result] = [
        e
        for e in of_type(answered, "TOOL_CALL_RESULT")
        if e["toolCallId"] == interrupt["toolCallId"]
    ]
    assert result["content"].startswith("Published")
    assert terminal(answered)["type"] == "RUN_FINISHED" and "outcome" not in terminal(answered)
    assert answered["pendingInterrupts"] == []
    # the same invocation, continued under its id, then finished with its result
    [again] = of_type(answered, "SUBAGENT_STARTED")
    assert again["subagentRunId"] == interrupt["subagentRunId"]
    assert of_type(answered, "SUBAGENT_FINISHED")[0]["result"]["agent"] == "publisher"


def test_a_resume_that_declines_or_cancels_declines_the_call(results: Json) -> None:
    found = case(results, "decline")
    for asked, answered, reason in (
        (found["asked"], found["answered"], "not today"),
        (found["asked2"], found["cancelled"], "cancelled from the AG-UI client"),
    ):
        _clean(answered)
        interrupt = _interrupt(asked)
        [resolved] = [
            e for e in of_type(answered, "CUSTOM") if e["name"] == "baton.interrupt.resolved"
        ]
        assert resolved["value"]["outcome"] == "declined"
        assert resolved["value"]["reason"] == reason
        [result] = [
            e
            for e in of_type(answered, "TOOL_CALL_RESULT")
            if e["toolCallId"] == interrupt["toolCallId"]
        ]
        assert "did not run" in result["content"]
        assert terminal(answered)["type"] == "RUN_FINISHED"


def test_a_file_question_is_an_interrupt_answered_with_the_file(results: Json) -> None:
    found = case(results, "upload")
    interrupt = _interrupt(found["asked"])
    assert interrupt["reason"] == "file_upload"
    assert interrupt["responseSchema"]["required"] == ["url"]
    assert interrupt["subagentRunId"]
    answered = found["answered"]
    _clean(answered)
    [resolved] = [e for e in of_type(answered, "CUSTOM") if e["name"] == "baton.interrupt.resolved"]
    assert resolved["value"]["outcome"] == "provided"
    assert resolved["value"]["name"] == "notes.txt"
    finished = of_type(answered, "SUBAGENT_FINISHED")
    assert any("notes.txt" in url for e in finished for url in e["result"]["mediaUrls"])
    assert terminal(answered)["type"] == "RUN_FINISHED"


def test_cancelling_on_purpose_ends_both_runs_cancelled_with_everything_closed(
    results: Json,
) -> None:
    found = case(results, "cancel")
    for run in (found["running"], found["stop"]):
        _clean(run)
        finished = terminal(run)
        assert finished["type"] == "RUN_FINISHED" and finished["outcome"] == {"type": "cancelled"}
        opened = {e["subagentRunId"] for e in of_type(run, "SUBAGENT_STARTED")}
        closed = {
            e["subagentRunId"]
            for e in run["events"]
            if e["type"] in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR")
        }
        assert opened and opened == closed
        assert all(
            e.get("code") == "cancelled" for e in run["events"] if e["type"] == "SUBAGENT_ERROR"
        )


def test_a_cancel_while_an_interrupt_waits_ends_cancelled_with_the_interrupt_closed(
    results: Json,
) -> None:
    found = case(results, "cancel")
    interrupt = _interrupt(found["asked"])
    cancelled = found["cancelled"]
    _clean(cancelled)
    assert terminal(cancelled)["outcome"] == {"type": "cancelled"}
    closed = [
        e["value"] for e in of_type(cancelled, "CUSTOM") if e["name"] == "baton.interrupt.resolved"
    ]
    assert [(v["interruptId"], v["outcome"]) for v in closed] == [(interrupt["id"], "closed")]
    assert cancelled["pendingInterrupts"] == []
    opened = {e["subagentRunId"] for e in of_type(cancelled, "SUBAGENT_STARTED")}
    ended = {
        e["subagentRunId"]
        for e in cancelled["events"]
        if e["type"] in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR")
    }
    assert opened == ended


def test_a_model_that_fails_ends_the_run_with_run_error(results: Json) -> None:
    run = case(results, "failing_model")["run"]
    assert types(run)[0] == "RUN_STARTED"
    error = terminal(run)
    assert error["type"] == "RUN_ERROR", types(run)
    assert error["code"] == "failed" and "failed" in error["message"]
    assert "\n" not in error["message"]


def test_bad_bodies_get_a_4xx_with_one_line_of_json_and_no_stream(results: Json) -> None:
    answers = case(results, "bad_bodies")
    expected = {
        "not_json": 422, "not_json_media": 415, "empty_object": 422, "messages_not_a_list": 422,
        "new_thread_without_a_message": 422, "bad_thread_id": 422, "image_part": 422,
        "blank_message": 422, "bad_last_event_id": 400, "unknown_option": 422, "no_token": 401,
    }  # fmt: skip
    for name, status in expected.items():
        answer = answers[name]
        assert answer["status"] == status, (name, answer)
        assert answer["contentType"] == "application/json", name
        detail = json.loads(answer["text"])["detail"]
        assert detail and "\n" not in detail, name
        assert "data:" not in answer["text"] or name == "image_part", name
    assert "threadId" in json.loads(answers["bad_thread_id"]["text"])["detail"]
    assert "image" in json.loads(answers["image_part"]["text"])["detail"]
    client = answers["client"]
    assert client["error"] is not None and "422" in client["error"]
    assert client["events"] == []


def _content(frames: list[Json]) -> list[Json]:
    """The content events of frames: what must arrive exactly once."""
    kinds = ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_RESULT")
    return [f["event"] for f in frames if f["event"]["type"] in kinds]


def test_a_dropped_stream_resumed_by_last_event_id_gets_every_missed_event_once(
    results: Json,
) -> None:
    found = case(results, "drop_and_resume")
    received, resumed, whole = found["received"], found["resumed"], found["whole"]
    _clean(resumed)
    _clean(whole)
    assert found["lastId"] and ":" in found["lastId"]
    assert terminal(resumed)["type"] == "RUN_FINISHED" and terminal(whole)["type"] == "RUN_FINISHED"
    # every logged event's frames came once: in the dropped stream or in the resumed one (but
    # for the end of a message the dropped stream opened: the resumed run never reopened it)
    ids = [f["id"] for f in received if f["id"]] + [f["id"] for f in resumed["frames"] if f["id"]]
    assert len(ids) == len(set(ids))
    groups: dict[str, list[str]] = {}
    kinds: list[str] = []
    for frame in whole["frames"]:
        kinds.append(frame["event"]["type"])
        if frame["id"]:
            groups[frame["id"]], kinds = kinds, []
    closing_only = {i for i, group in groups.items() if set(group) == {"TEXT_MESSAGE_END"}}
    assert set(ids) - closing_only == set(groups) - closing_only
    # and with them every piece of content, in order
    got = _content(received) + _content(resumed["frames"])
    assert got == _content(whole["frames"])
    assert len(_content(resumed["frames"])) > 0  # the resumed stream had work to show


def test_a_client_that_aborts_and_rejoins_holds_everything_once(results: Json) -> None:
    found = case(results, "abort_and_rejoin")
    assert found["first"]["error"] is None  # an abort is the client's own doing: no error
    again = found["again"]
    _clean(again)
    assert terminal(again)["type"] == "RUN_FINISHED"
    messages = {m["id"]: m for m in found["messages"] if m["role"] in ("assistant", "tool")}
    reference = {m["id"]: m for m in found["reference"] if m["role"] in ("assistant", "tool")}
    assert messages.keys() == reference.keys()
    for key, message in reference.items():
        assert messages[key].get("content") == message.get("content"), key
        calls = [c["function"] for c in messages[key].get("toolCalls") or ()]
        assert calls == [c["function"] for c in message.get("toolCalls") or ()], key


def test_the_front_end_in_the_docs_runs_as_written(results: Json) -> None:
    found = case(results, "docs_front_end")
    assert found["error"] is None, found["error"]
    printed = found["printed"]
    assert "[painter started]" in printed and "[publisher started]" in printed
    assert "? publisher asks to run publish" in printed
    assert "[publisher]" in printed and ".png" in printed  # the painter's picture, by URL
    assert printed.rstrip().splitlines()[-1].startswith("done:")

"""Questions for a file or an image, asked by a sub-agent and answered through the embedding API
(``Session.questions()``, ``Session.answer()``), on the in-process bus and on Redis, where the
sub-agent's channel is the bus's (docs/protocol.md, *Questions*).

The built-in ``reviewer`` asks for a file with the offline model; a scripted sub-agent shows what
a vision model is sent for ``describe_image`` and that the interaction budget holds over the bus.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import pytest

from baton.api import (
    AnswerRefused,
    ApprovalNotFound,
    Cancelled,
    Decision,
    Provided,
    QuestionNotFound,
    Session,
    SessionConfig,
)
from baton.bus.events import (
    AgentResult,
    GuardFired,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
)
from baton.engine import LoopLimits
from baton.engine.media import file_upload_tool, image_tool
from baton.llm.script import Call, Reply
from baton.subagents.png import picture_for
from baton.subagents.profiles import AgentLimits, Profile, builtin_profiles
from tests.support.events import logged_events
from tests.support.models import call, scripted

pytestmark = pytest.mark.timeout(60)


def _config(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, **fields: object
) -> SessionConfig:
    if backend == "redis":
        fields["bus_url"] = request.getfixturevalue("redis_server").url
        fields["bus_prefix"] = f"q{abs(hash(request.node.nodeid)) % 10**8}"
    return SessionConfig(media_dir=tmp_path / "media", **fields)


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_sub_agents_upload_is_stored_and_used_and_answered_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("three herons and a fox\n")
    config = _config(backend, request, tmp_path, task="review my notes")
    answered: QuestionAnswered | None = None
    async with Session(config) as session:
        async for event in session.events():
            if isinstance(event, QuestionAsked):
                [open_one] = await session.questions()
                assert (open_one.id, open_one.kind, open_one.agent) == (
                    event.question_id,
                    "upload",
                    "reviewer",
                )
                assert open_one.tool == "request_file_upload" and open_one.expires_at
                with pytest.raises(AnswerRefused, match="answer it with a file"):
                    await session.answer(event.question_id, True)  # a decision to an upload
                with pytest.raises(AnswerRefused, match="upload the file instead"):
                    await session.answer(event.question_id, Provided(url=notes.as_uri()))
                assert await session.answer(event.question_id, notes) == "reviewer"
            elif isinstance(event, QuestionAnswered):
                answered = event
                with pytest.raises(QuestionNotFound, match="already answered"):
                    await session.answer(event.question_id, Cancelled())
                assert await session.questions() == []
        result = await session.run()
    assert answered is not None and answered.outcome == "provided"
    stored = sorted((tmp_path / "media").rglob("reviewer-upload-*-notes.txt"))
    assert [p.read_text() for p in stored] == ["three herons and a fox\n"]
    assert answered.url == stored[0].as_uri() and answered.name == "notes.txt"
    assert answered.media_type == "text/plain"
    assert result.status == "completed"
    assert answered.url in result.media_urls  # the agent used it: its result carries it
    assert answered.url in result.answer


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_cancel_declines_the_tool_for_the_turn(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = _config(backend, request, tmp_path, task="review my notes")
    async with Session(config) as session:
        async for event in session.events():
            if isinstance(event, QuestionAsked):
                await session.answer(event.question_id, Cancelled(reason="not today"))
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    [answered] = [e for e in log if isinstance(e, QuestionAnswered)]
    assert answered.outcome == "cancelled"
    [reported] = [e for e in log if isinstance(e, AgentResult) and e.agent == "reviewer"]
    assert reported.content.startswith("Not done")
    assert "no file was uploaded (the user cancelled)" in reported.content
    assert not list((tmp_path / "media").rglob("*upload*"))
    assert result.media_urls == []


async def test_an_unanswered_question_expires_and_cannot_be_answered_after(
    tmp_path: Path,
) -> None:
    quick = builtin_profiles()["reviewer"]
    limits = AgentLimits(loop=LoopLimits(upload_timeout_s=0.3))
    reviewer = Profile(
        quick.name, quick.description, quick.system_prompt, quick.tools, limits=limits
    )
    config = SessionConfig(task="review my notes", media_dir=tmp_path, profiles=[reviewer])
    asked: QuestionAsked | None = None
    async with Session(config) as session:
        async for event in session.events():
            if isinstance(event, QuestionAsked):
                asked = event
            elif isinstance(event, QuestionAnswered):
                assert event.outcome == "expired" and "no answer within 0.3 s" in event.reason
        assert asked is not None
        with pytest.raises(QuestionNotFound, match="already answered"):
            await session.answer(asked.question_id, Provided(url="https://example.com/n.txt"))
        result = await session.run()
    assert "no file was uploaded (no answer within 0.3 s)" in result.answer


async def test_an_unknown_question_is_refused_by_name(tmp_path: Path) -> None:
    async with Session(SessionConfig(task="paint a fox", media_dir=tmp_path)) as session:
        with pytest.raises(QuestionNotFound, match="no such question was asked"):
            await session.answer("q-nope", Cancelled())
        with pytest.raises(ApprovalNotFound, match="no approval was requested"):
            await session.answer("q-nope", Decision(approved=True))
        await session.run()


def _viewer() -> Profile:
    return Profile(
        name="viewer",
        description="Looks at a picture a person supplies.",
        system_prompt="[baton:subagent] You look at pictures.",
        tools=(image_tool(), file_upload_tool()),
    )


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_describe_image_shows_the_picked_image_to_the_model_as_image_content(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    picture = tmp_path / "heron.png"
    picture.write_bytes(picture_for("a heron"))
    server, sub_model = scripted(
        [
            call("describe_image", call_id="i1", prompt="which bird is it?"),
            call("send_message", call_id="r1", content="It is a heron.", type="result"),
            Reply(text="Reported."),
        ],
        fallback=False,
    )
    config = _config(backend, request, tmp_path, task="ask the viewer about the bird",
                     profiles=[_viewer()])  # fmt: skip
    async with Session(config, subagent_models=lambda _: sub_model) as session:
        async for event in session.events():
            if isinstance(event, QuestionAsked):
                assert event.kind == "image" and event.prompt == "which bird is it?"
                text = Provided(url="data:text/plain,hi", media_type="text/plain")
                with pytest.raises(AnswerRefused, match=r"a model can look at .*, not text/plain"):
                    await session.answer(event.question_id, text)
                await session.answer(event.question_id, picture)
            elif isinstance(event, SessionFinished):
                break
        result = await session.run()
    assert result.status == "completed"
    shown = [
        part["image_url"]["url"]
        for message in server.requests[1].messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]
    assert shown == ["data:image/png;base64," + base64.b64encode(picture.read_bytes()).decode()]


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_one_dialog_per_round_holds_over_the_bus(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    two_asks = Reply(
        calls=[
            Call("request_file_upload", json.dumps({"prompt": "the notes"}), id="u1"),
            Call("request_file_upload", json.dumps({"prompt": "the slides"}), id="u2"),
        ]
    )
    server, sub_model = scripted(
        [two_asks, call("send_message", call_id="r1", content="Got one.", type="result"),
         Reply(text="Reported.")],
        fallback=False,
    )  # fmt: skip
    config = _config(backend, request, tmp_path, task="ask the viewer for the files",
                     profiles=[_viewer()])  # fmt: skip
    async with Session(config, subagent_models=lambda _: sub_model) as session:
        async for event in session.events():
            if isinstance(event, QuestionAsked):
                await session.answer(event.question_id, Provided(url="https://example.com/a.txt"))
        await session.run()
        log = await logged_events(session.bus, session.id)
    assert [e.call_id for e in log if isinstance(e, QuestionAsked)] == ["u1"]
    guards = [(e.outcome, e.call_id) for e in log if isinstance(e, GuardFired)]
    assert guards == [("interaction-budget", "u2")]
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1].messages
               if m["role"] == "tool"}  # fmt: skip
    assert "https://example.com/a.txt" in results["u1"]
    assert "u2" in results and "https://example.com/a.txt" not in results["u2"]


async def test_the_answer_arrives_within_the_time_it_waits(tmp_path: Path) -> None:
    """The question says until when it waits, and that instant is in the future when asked."""
    async with Session(SessionConfig(task="review my notes", media_dir=tmp_path)) as session:
        async for event in session.events():
            if isinstance(event, QuestionAsked):
                assert (event.expires_at - event.ts).total_seconds() == pytest.approx(180, abs=1)
                with anyio.fail_after(5):
                    await session.answer(event.question_id, Cancelled())
        await session.run()

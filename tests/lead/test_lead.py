"""The lead's exact behaviour, driven by the scripted model: hints, failures, timeouts, cancel,
approvals of the lead's own tools."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from baton.api import Session, SessionConfig
from baton.bus.connect import open_bus
from baton.bus.events import (
    AgentExited,
    AgentSpawned,
    ApprovalDecided,
    ApprovalRequested,
    RoundEnded,
    RoundStarted,
    SessionFinished,
)
from baton.llm import OpenAIChatModel
from baton.llm.script import HttpError, Reply
from baton.subagents.profiles import builtin_profiles
from tests.lead.helpers import gated_profile, gated_tool, other_tasks
from tests.support.events import logged_events
from tests.support.models import call, scripted


async def test_unknown_subagent_name_gets_a_hint_listing_the_profiles(tmp_path: Path) -> None:
    server, model = scripted(
        [
            call("send_message", to="ghost", content="paint", type="task"),
            call("answer", text="Sorry.", status="cannot"),
            call("answer", text="Sorry.", status="cannot"),
        ],
        fallback=False,
    )
    config = SessionConfig(task="paint a fox", media_dir=tmp_path, lead_policy="structural")
    async with Session(config, model=model) as session:
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    # the lead said, typed, that it cannot: sent back once with the profiles, then not completed
    assert (result.status, result.answer) == ("incomplete", "Sorry.")
    assert result.error == "the lead answered that it cannot do this"
    assert "You answered that this cannot be done" in server.requests[2].messages[-1]["content"]
    hint = server.requests[1].messages[-1]
    assert hint["role"] == "tool"
    assert "no sub-agent or profile named 'ghost'" in hint["content"]
    for name, profile in builtin_profiles().items():
        assert f"{name} ({profile.description})" in hint["content"]
    assert not [e for e in log if isinstance(e, AgentSpawned)]


async def test_lead_is_told_it_cannot_message_itself(tmp_path: Path) -> None:
    server, model = scripted(
        [call("send_message", to="lead", content="hi"), Reply(text="Hello."), Reply(text="Hello.")],
        fallback=False,
    )
    async with Session(SessionConfig(task="hi", media_dir=tmp_path), model=model) as session:
        result = await session.run()
    assert result.answer == "Hello."
    assert "answer the user directly" in server.requests[1].messages[-1]["content"]


async def test_system_prompt_lists_profiles_and_marks_the_lead(tmp_path: Path) -> None:
    server, model = scripted([Reply(text="Nothing to do.")], fallback=False)
    config = SessionConfig(task="hi", media_dir=tmp_path, instructions="Be terse.")
    async with Session(config, model=model) as session:
        await session.run()
    body = server.requests[0].body
    system = body["messages"][0]["content"]
    assert system.startswith("[baton:lead]") and system.endswith("Be terse.")
    assert "- painter: Paints pictures" in system
    send = next(t for t in body["tools"] if t["function"]["name"] == "send_message")
    assert send["function"]["parameters"]["properties"]["to"]["enum"] == [
        "painter",
        "writer",
        "helper",
        "publisher",
        "reviewer",
    ]


async def test_model_failure_ends_the_session_as_failed(tmp_path: Path) -> None:
    # not retried: a refused request (400) fails the same way every time
    _, model = scripted([HttpError(400, "context too long", "invalid_request_error")] * 3)
    async with Session(SessionConfig(task="hi", media_dir=tmp_path), model=model) as session:
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    assert result.status == "failed" and "context too long" in result.error
    assert isinstance(log[-1], SessionFinished) and log[-1].status == "failed"


async def test_timeout_gets_a_last_answer_and_shuts_the_subagents_down(tmp_path: Path) -> None:
    gate = anyio.Event()  # never set: the sub-agent stays busy
    server, model = scripted()
    config = SessionConfig(
        task="paint a fox", profiles=[gated_profile(gate)], media_dir=tmp_path, timeout_s=0.5
    )
    async with open_bus() as bus:
        async with Session(config, bus=bus, model=model) as session:
            result = await session.run()
        log = await logged_events(bus, session.id)
        left = await bus.inboxes.read(session.id, "slow")
    assert result.status == "timed_out"
    assert isinstance(log[-1], SessionFinished) and log[-1].status == "timed_out"
    note = server.requests[-1].messages[-1]["content"]
    assert note.startswith("[error from session] The session timed out") and "slow" in note
    # The shutdown the session sent reached the busy agent mid-tool: it left with that reason,
    # logged before the session's end, and nothing is left unread in its inbox.
    exits = [(e.agent, e.reason) for e in log if isinstance(e, AgentExited)]
    assert exits == [("slow", "shutdown")]
    assert left == []


def _idle_writer(tmp_path: Path) -> tuple[SessionConfig, OpenAIChatModel]:
    """A writer that works one round and then waits on its inbox (outstanding, not busy)."""
    _, sub_model = scripted(
        [call("summarise", text="a poem about foxes"), Reply(text="Thinking it over.")],
        fallback=False,
    )
    profiles = [builtin_profiles()["writer"]]
    config = SessionConfig(task="write a poem", profiles=profiles, media_dir=tmp_path)
    return config, sub_model


async def test_cancel_mid_session_shuts_subagents_down_and_finishes_cancelled(
    tmp_path: Path,
) -> None:
    config, sub_model = _idle_writer(tmp_path)
    before = other_tasks()
    async with open_bus() as bus:
        async with Session(config, bus=bus, subagent_models=lambda _: sub_model) as session:
            async for event in session.events():
                if isinstance(event, RoundEnded) and event.agent == "writer" and event.round == 2:
                    session.cancel()
            result = await session.run()
        log = await logged_events(bus, session.id)
    assert result.status == "cancelled"
    exits = [e for e in log if isinstance(e, AgentExited)]
    assert [(e.agent, e.reason) for e in exits] == [("writer", "shutdown")]
    assert isinstance(log[-1], SessionFinished) and log[-1].status == "cancelled"
    assert other_tasks() <= before


async def test_cancelling_the_enclosing_scope_logs_cancelled_and_propagates(
    tmp_path: Path,
) -> None:
    config, sub_model = _idle_writer(tmp_path)
    before = other_tasks()
    async with open_bus() as bus:
        with anyio.CancelScope() as scope:
            async with Session(config, bus=bus, subagent_models=lambda _: sub_model) as session:
                async for event in session.events():
                    if isinstance(event, RoundEnded) and event.agent == "writer":
                        scope.cancel()  # as Ctrl-C does to `baton run`
                pytest.fail("the session kept running after its scope was cancelled")
        assert scope.cancelled_caught
        log = await logged_events(bus, session.id)
        left = await bus.inboxes.read(session.id, "writer")
    assert isinstance(log[-1], SessionFinished) and log[-1].status == "cancelled"
    exited = [e for e in log if isinstance(e, AgentExited)]
    # the shutdown was sent: either the writer read it, or it is still in its inbox
    assert exited or [envelope.type for envelope in left] == ["shutdown"]
    assert other_tasks() <= before


@pytest.mark.parametrize("approved", [True, False])
async def test_lead_tool_approval_answered_through_the_session(
    approved: bool, tmp_path: Path
) -> None:
    server, model = scripted(
        [call("deploy", call_id="d1", target="prod"), Reply(text="Finished.")], fallback=False
    )
    config = SessionConfig(task="deploy", media_dir=tmp_path, approve="ask")
    async with Session(config, model=model, tools=[gated_tool()]) as session:
        async for event in session.events():
            if isinstance(event, ApprovalRequested):
                assert [c.call_id for c in event.calls] == ["d1"]
                assert await session.answer("d1", approved, reason="checked") == "lead"
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    assert result.status == "completed"
    answer = server.requests[1].messages[-1]["content"]
    assert ("deployed to prod" in answer) is approved
    decided = [e for e in log if isinstance(e, ApprovalDecided)]
    assert [(e.call_id, e.approved, e.reason) for e in decided] == [("d1", approved, "checked")]


async def test_deny_mode_declines_without_asking(tmp_path: Path) -> None:
    server, model = scripted(
        [call("deploy", call_id="d1", target="prod"), Reply(text="Could not.")], fallback=False
    )
    config = SessionConfig(task="deploy", media_dir=tmp_path, approve="deny")
    async with Session(config, model=model, tools=[gated_tool()]) as session:
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    assert result.answer == "Could not."
    assert "deployed" not in server.requests[1].messages[-1]["content"]
    assert [e.approved for e in log if isinstance(e, ApprovalDecided)] == [False]


async def test_a_shutdown_from_outside_cancels_the_lead_mid_turn(tmp_path: Path) -> None:
    """`baton cancel` puts a shutdown from the user on the lead's inbox: a lead in the middle of
    a model request (here one that never answers) stops at once, not at its next inbox read."""
    _, model = scripted([Reply(text="never", hold_after=0, hold=60.0)], fallback=False)
    config = SessionConfig(task="hi", media_dir=tmp_path)
    with anyio.fail_after(20):  # the held request alone would last a minute
        async with Session(config, model=model) as session:
            async for event in session.events():
                if isinstance(event, RoundStarted) and event.agent == "lead":
                    await session.post("stop", type="shutdown")
            result = await session.run()
    assert result.status == "cancelled"

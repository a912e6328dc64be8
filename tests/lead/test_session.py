"""Whole sessions, in-process and on Redis: delegation, media, the event stream, follow-ups."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest

import baton.session.lifecycle as session_module
from baton.api import Session, SessionConfig, Worker, open_session
from baton.bus.events import (
    AgentClaimed,
    AgentExited,
    AgentResult,
    AgentSpawned,
    BudgetUpdated,
    Event,
    SessionFinished,
    SessionStarted,
    TextDelta,
    ToolCalled,
)
from baton.bus.messages import Envelope
from baton.engine import tool
from baton.engine.spend import SpendLimits
from baton.llm.script import Reply
from baton.subagents.loop import AgentParts
from baton.subagents.profiles import builtin_profiles
from tests.conftest import BusFactory
from tests.lead.helpers import PAINT_AND_WRITE, gated_profile, other_tasks
from tests.support.events import logged_events
from tests.support.logged import on_logged
from tests.support.media import file_path
from tests.support.models import call, scripted


async def test_offline_session_cites_every_result_and_its_media(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    # four tasks over three profiles: the painter is sent two (round-robin), in parallel
    task = "paint a fox, write a haiku, say hello and paint a red barn"
    config = SessionConfig(task=task, media_dir=tmp_path)
    before = other_tasks()
    async with make_bus() as bus:
        async with Session(config, bus=bus) as session:
            result = await session.run()
        log = await logged_events(bus, session.id)
    assert other_tasks() <= before
    assert result.status == "completed"
    results = [event for event in log if isinstance(event, AgentResult)]
    agents = {event.agent for event in results}
    # the second painting goes to "painter" if it was still reading its inbox, else to "painter-2"
    assert {"painter", "writer", "helper"} <= agents <= {"painter", "painter-2", "writer", "helper"}
    media = [url for event in results for url in event.media_urls]
    assert media and sorted(result.media_urls) == sorted(set(media))
    painted = " ".join(e.content for e in results if e.agent.startswith("painter"))
    assert "paint a fox" in painted and "paint a red barn" in painted
    for url in media:
        assert url in result.answer
        assert file_path(url).is_file()
    started, finished = log[0], log[-1]
    assert isinstance(started, SessionStarted) and started.offline
    assert started.model == "baton-offline"
    assert isinstance(finished, SessionFinished)
    assert finished.status == "completed" and finished.answer == result.answer


async def test_event_stream_is_token_by_token_while_the_bus_gets_coalesced_text(
    tmp_path: Path,
) -> None:
    # A flush interval far beyond the test: the bus gets text only before other events.
    config = SessionConfig(task=PAINT_AND_WRITE, media_dir=tmp_path, text_flush_s=30.0)
    seen: list[Event] = []
    async with Session(config) as session:
        async for event in session.events():
            seen.append(event)
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    streamed = [e.text for e in seen if isinstance(e, TextDelta) and e.agent == "lead"]
    logged = [e.text for e in log if isinstance(e, TextDelta) and e.agent == "lead"]
    assert "".join(streamed) == "".join(logged)
    assert result.answer in "".join(streamed)
    assert len(logged) == 2  # one per answering lead turn, written before its round.ended
    assert len(streamed) > 2 * len(logged)
    assert isinstance(seen[0], SessionStarted)
    assert isinstance(seen[-1], SessionFinished) and seen[-1].status == "completed"
    # Sub-agents' events reach the in-process stream too, from the log.
    assert {e.agent for e in seen if isinstance(e, AgentExited)} == {"painter", "writer"}
    hosted = [e for e in seen if isinstance(e, AgentClaimed)]
    requested = [e for e in seen if isinstance(e, AgentSpawned)]
    assert sorted(e.agent for e in hosted) == ["painter", "writer"]  # one of each, no more
    assert sorted(e.agent for e in requested) == ["painter", "writer"]


async def test_follow_up_posted_mid_session_is_answered_in_the_same_session(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    gate = anyio.Event()
    profiles = [gated_profile(gate)]
    config = SessionConfig(task="paint a fox", profiles=profiles, media_dir=tmp_path)
    async with make_bus() as bus:
        async with Session(config, bus=bus) as session:
            posted = False
            async for event in session.events():
                if isinstance(event, AgentClaimed) and not posted:
                    # the sub-agent is busy with the first task: a person asks for more
                    posted = True
                    async with make_bus() as elsewhere:  # as `baton post` from another process
                        follow_up = Envelope(
                            session=session.id,
                            sender="user",
                            recipient="lead",
                            type="task",
                            content="also paint a cat",
                        )
                        await elsewhere.inboxes.send(follow_up)
                if (
                    isinstance(event, ToolCalled)
                    and event.agent == "lead"
                    and "also paint a cat" in event.call.arguments
                ):
                    gate.set()
            result = await session.run()
        log = await logged_events(bus, session.id)
    assert result.status == "completed"
    assert "also paint a cat" in result.answer and "paint a fox" in result.answer
    results = [e for e in log if isinstance(e, AgentResult)]
    # "slow" left after its first task, unaware of the second: a fresh agent got that one
    assert [e.agent for e in results] == ["slow", "slow-2"]
    assert "also paint a cat" in results[1].content
    assert [e for e in log if isinstance(e, SessionFinished)] == [log[-1]]


async def test_default_profiles_are_the_builtin_demo_profiles(tmp_path: Path) -> None:
    config = SessionConfig(task="write a line", media_dir=tmp_path)
    async with Session(config) as session:
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    assert result.status == "completed"
    spawned = {e.profile for e in log if isinstance(e, AgentSpawned)}
    assert spawned <= set(builtin_profiles()) and spawned


async def test_external_workers_do_the_work_when_local_workers_are_off(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as session_bus, make_bus() as worker_bus:
        async with Worker(
            worker_bus, name="remote-1", parts=AgentParts(media_dir=tmp_path)
        ) as worker:
            session = open_session(
                PAINT_AND_WRITE, bus=session_bus, local_workers=False, media_dir=tmp_path
            )
            async with session:
                result = await session.run()
            assert worker.claimed == 2
        log = await logged_events(session_bus, session.id)
    assert result.status == "completed" and result.media_urls
    assert all(url in result.answer for url in result.media_urls)
    hosted = {e.agent: e.worker for e in log if isinstance(e, AgentClaimed)}
    assert hosted == {"painter": "remote-1", "writer": "remote-1"}


async def test_api_docstring_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import baton.api

    doc = baton.api.__doc__ or ""
    lines = doc.split("::\n\n", 1)[1].splitlines()
    end = next(i for i, line in enumerate(lines) if line and not line.startswith(" "))
    source = textwrap.dedent("\n".join(lines[:end]))
    assert "anyio.run(main)" in source
    monkeypatch.chdir(tmp_path)  # media/ is written under the working directory
    namespace: dict[str, object] = {}
    exec(source.replace("anyio.run(main)", ""), namespace)
    await namespace["main"]()  # type: ignore[operator]
    printed = capsys.readouterr().out
    assert "completed ['file://" in printed


async def test_leaving_the_block_of_a_session_that_will_not_end_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lead stuck where ``cancel()`` cannot reach it (a tool shielding its wait) no longer
    hangs ``async with Session``: past the bound the session's tasks are cancelled outright,
    with a warning (here the warning is what lets the stubborn tool go)."""
    monkeypatch.setattr(session_module, "CANCEL_SLACK_S", 0.0)
    monkeypatch.setattr(session_module, "WORKER_STOP_S", 0.1)
    monkeypatch.setattr(session_module, "TAIL_DRAIN_S", 0.1)
    entered, released = anyio.Event(), anyio.Event()

    @tool(name="stubborn")
    async def stubborn(target: str) -> str:
        """Ignore cancellation.

        Args:
            target: anything
        """
        entered.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(25):  # before: the test's end
            await released.wait()
        return "done"

    _, model = scripted([call("stubborn", target="now"), Reply(text="ok")], fallback=False)
    config = SessionConfig(
        task="be stubborn", media_dir=tmp_path, shutdown_grace_s=0.1, local_workers=False
    )
    with on_logged("baton.session", f"session {config.session_id}: not finished", released.set):
        with anyio.fail_after(20):
            async with Session(config, model=model, tools=[stubborn]) as session:
                session.start()
                await entered.wait()
    assert released.is_set()
    assert session.result is not None and session.result.status == "cancelled"


async def test_the_budget_is_on_the_bus_before_any_agent_and_no_agent_spends_past_it(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    # two calls: the lead's delegation and one sub-agent call; everything after is refused
    budget = SpendLimits(max_model_calls=2)
    config = SessionConfig(
        task=PAINT_AND_WRITE, media_dir=tmp_path, budget=budget, failure_grace_s=10.0
    )
    async with make_bus() as bus:
        async with Session(config, bus=bus) as session:
            result = await session.run()
        log = await logged_events(bus, session.id)
        spent = await bus.budget.totals(session.id)
    assert spent.limits == budget  # where a remote worker's agents read it
    assert spent.calls == 2
    updates = [e for e in log if isinstance(e, BudgetUpdated)]
    assert [(e.calls, e.max_calls) for e in updates] == [(1, 2), (2, 2)]
    exits = {e.agent: e.reason for e in log if isinstance(e, AgentExited)}
    assert set(exits) == {"painter", "writer"} and "budget" in exits.values()
    assert result.status != "completed"


async def test_the_leads_tool_choice_is_asked_and_an_invented_url_is_no_completed_session(
    tmp_path: Path,
) -> None:
    invented = "https://via.placeholder.com/fox.png"
    reply = Reply(text=f"Here is your fox: {invented}")
    server, model = scripted([reply, reply], fallback=False)
    # the made-up picture is sent back once with the fact, then it is the answer
    config = SessionConfig(task="paint a fox", media_dir=tmp_path, tool_choice="required")
    async with model, Session(config, model=model) as session:
        result = await session.run()
        log = await logged_events(session.bus, session.id)
    assert [request.body["tool_choice"] for request in server.requests] == ["required"] * 2
    assert result.status == "incomplete" and result.invented_urls == [invented]
    finished = log[-1]
    assert isinstance(finished, SessionFinished)
    assert finished.status == "incomplete" and finished.invented_urls == [invented]

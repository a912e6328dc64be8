"""A remote A2A agent hosted by a worker: the relay against a real A2A server on loopback (the
SDK's own server parts, :mod:`tests.support.a2a_agent`), read through the lead's inbox."""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import pytest

from baton.bus.base import Bus
from baton.bus.events import AgentProgress, ApprovalDecided, ApprovalRequested, Event
from baton.bus.memory import MemoryBus
from baton.bus.messages import ApproveMode, SpawnRequest, TraceContext
from baton.engine import LoopLimits
from baton.engine.bus_channel import answer_approval
from baton.subagents import a2a_remote
from baton.subagents.a2a_card import forget_cards
from baton.subagents.a2a_config import A2AConfig
from baton.subagents.a2a_remote import QUESTION_TOOL
from baton.subagents.loop import AgentParts
from baton.subagents.png import picture_for
from baton.subagents.profiles import AgentLimits, Profile
from baton.subagents.worker import Worker, WorkerLimits
from tests.engine.helpers import Observed
from tests.subagents.helpers import SESSION, Lead, task
from tests.support.a2a_agent import free_port, serve_agent
from tests.support.events import logged_events, wait_for_event
from tests.support.media import file_path

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(autouse=True)
def fresh_cards() -> None:
    forget_cards()  # each test's agent listens on a port of its own


def remote(url: str, **options: object) -> Profile:
    limits = AgentLimits(idle_timeout_s=30.0, loop=LoopLimits(approval_timeout_s=30.0))
    return Profile(
        name="remote",
        description="",
        system_prompt="unused",
        limits=limits,
        a2a=A2AConfig.model_validate({"url": url, **options}),
    )


@asynccontextmanager
async def hosting(
    profile: Profile, tmp_path: Path, observed: Observed | None = None
) -> AsyncIterator[Bus]:
    async with MemoryBus() as bus:
        worker = Worker(bus, {profile.name: profile}, parts=AgentParts(media_dir=tmp_path))
        if observed is not None:
            worker.telemetry = observed.telemetry
        async with worker:
            yield bus


async def delegate(bus: Bus, content: str, agent: str = "r1", approve: ApproveMode = "ask") -> None:
    await bus.inboxes.send(task(agent, content, trace=TraceContext(traceparent=TRACEPARENT)))
    await bus.spawns.submit(
        SpawnRequest(session=SESSION, agent=agent, profile="remote", approve=approve)
    )


def _progress(text: str) -> Callable[[Event], bool]:
    return lambda event: isinstance(event, AgentProgress) and event.content == text


async def test_progress_media_and_text_come_back_as_a_local_agent_s_would(tmp_path: Path) -> None:
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "paint a fox")
        lead = Lead(bus)
        (result,) = await lead.until_results(1)
    assert result.sender == "r1" and result.meta["reason"] == "finished"
    assert result.content == "painted a fox"
    assert result.media_urls == [f"{url}/media/a-fox.png"]
    assert "sketching a fox" in [m.content for m in lead.progress]
    assert [text for text, _, _ in seen.messages] == ["paint a fox"]
    # the W3C trace context of the round reached the remote with each request
    assert seen.traceparents and all(t.split("-")[1] == TRACEPARENT.split("-")[1]
                                     for t in seen.traceparents)  # fmt: skip


async def test_a_picture_sent_inline_is_put_in_the_media_store(tmp_path: Path) -> None:
    async with serve_agent() as (url, _), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "draw a lighthouse")
        (result,) = await Lead(bus).until_results(1)
    assert result.content == "drew a lighthouse"
    (stored,) = result.media_urls
    assert stored.startswith("file://") and stored.endswith(".png")
    assert file_path(stored).read_bytes() == picture_for("a lighthouse")


async def test_the_remote_hears_the_traceparent_of_the_agent_s_span(tmp_path: Path) -> None:
    observed = Observed()
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path, observed) as bus:
        await delegate(bus, "paint a fox")
        await Lead(bus).until_results(1)
    (span,) = [s for s in observed.spans() if s.name == "invoke_agent r1"]
    context = span.context
    assert span.parent is not None and f"{span.parent.span_id:016x}" == TRACEPARENT.split("-")[2]
    assert span.attributes is not None and span.attributes["gen_ai.conversation.id"] == SESSION
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
    assert seen.traceparents and set(seen.traceparents) == {expected}  # the card, the message


async def test_input_required_is_an_approval_and_the_answer_the_next_message(
    tmp_path: Path,
) -> None:
    observed = Observed()
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path, observed) as bus:
        await delegate(bus, "ask a heron")
        asked = await wait_for_event(bus, SESSION, ApprovalRequested, timeout=30)
        (call,) = asked.calls
        assert call.name == QUESTION_TOOL and "which colour for a heron?" in call.arguments
        assert asked.policy is None and asked.expires_at is not None  # a person is asked
        assert await answer_approval(bus, SESSION, call.call_id, True, "blue") == "r1"
        (result,) = await Lead(bus).until_results(1)
        log = await logged_events(bus, SESSION)
    assert result.content == "painted a heron in blue"
    assert result.media_urls == [f"{url}/media/a-heron-in-blue.png"]
    (first, answer) = seen.messages
    assert answer[0] == "blue" and answer[1:] == (first[1], answer[2]) and answer[2]
    decided = [e for e in log if isinstance(e, ApprovalDecided)]
    assert [(e.call_id, e.approved) for e in decided] == [(call.call_id, True)]
    assert observed.counts("hitl.decision", "source") == {"a2a": 1}


async def test_a_declined_question_cancels_the_remote_task_and_reports_an_error(
    tmp_path: Path,
) -> None:
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "ask a heron")
        asked = await wait_for_event(bus, SESSION, ApprovalRequested, timeout=30)
        await answer_approval(bus, SESSION, asked.calls[0].call_id, False, "no")
        (result,) = await Lead(bus).until_results(1)
    assert result.meta["reason"] == "error"
    assert "which colour for a heron?" in result.content and "cancelled" in result.content
    assert len(seen.cancelled) == 1


async def test_an_unanswered_question_cancels_the_remote_task_in_time(tmp_path: Path) -> None:
    limits = AgentLimits(idle_timeout_s=30.0, loop=LoopLimits(approval_timeout_s=0.3))
    async with serve_agent() as (url, seen):
        async with hosting(dataclasses.replace(remote(url), limits=limits), tmp_path) as bus:
            await delegate(bus, "ask a heron")  # nobody answers
            with anyio.fail_after(10):
                (result,) = await Lead(bus).until_results(1)
            log = await logged_events(bus, SESSION)
    assert result.meta["reason"] == "error" and "nobody said yes" in result.content
    decided = [e for e in log if isinstance(e, ApprovalDecided)]
    assert [(e.approved, e.reason) for e in decided] == [(False, "no answer in time")]
    assert len(seen.cancelled) == 1 and len(seen.messages) == 1  # told, and never answered


async def test_a_remote_that_asks_without_end_is_stopped_at_the_round_limit(
    tmp_path: Path,
) -> None:
    loop = LoopLimits(soft_max_rounds=2, hard_max_rounds=3)
    async with serve_agent() as (url, seen):
        limits = AgentLimits(idle_timeout_s=30.0, loop=loop)
        async with hosting(dataclasses.replace(remote(url), limits=limits), tmp_path) as bus:
            await delegate(bus, "quiz a heron", approve="auto")  # every question says yes
            with anyio.fail_after(30):
                (result,) = await Lead(bus).until_results(1)
            with anyio.fail_after(10):
                await seen.cancel_seen.wait()
            log = await logged_events(bus, SESSION)
    assert result.meta["reason"] == "error"
    assert "after 3 questions this round" in result.content, result.content
    asked = [e for e in log if isinstance(e, ApprovalRequested)]
    assert [e.policy for e in asked] == ["auto"] * 3  # the policy answers: nobody is asked
    assert [text for text, _, _ in seen.messages] == ["quiz a heron", "yes", "yes", "yes"]
    assert len(seen.cancelled) == 1


async def test_a_shutdown_mid_task_cancels_it_on_the_remote(tmp_path: Path) -> None:
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "hold the line")
        # once the remote said it works on it (so it has named its task), the lead shuts it down
        await wait_for_event(bus, SESSION, _progress("holding the line"), timeout=30)
        await bus.inboxes.send(task("r1", "", type="shutdown"))
        (result,) = await Lead(bus).until_results(1)
        with anyio.fail_after(10):
            await seen.cancel_seen.wait()
    assert result.meta["reason"] == "shutdown"
    (held,) = {task_id for _, _, task_id in seen.messages} | set(seen.cancelled)
    assert seen.cancelled == [held]


@contextmanager
def on_log(logger: str, words: str, then: Callable[[], None]) -> Iterator[None]:
    """Calls ``then`` when ``logger`` logs a line with ``words`` (at INFO and above)."""

    class Hook(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if words in record.getMessage():
                then()

    found, hook = logging.getLogger(logger), Hook(logging.INFO)
    level = found.level
    found.setLevel(logging.INFO)
    found.addHandler(hook)
    try:
        yield
    finally:
        found.removeHandler(hook)
        found.setLevel(level)


async def test_a_shutdown_before_the_remote_named_its_task_still_cancels_it(
    tmp_path: Path,
) -> None:
    waiting = anyio.Event()
    with on_log("baton.subagents.a2a_remote", "named its task", waiting.set):
        async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
            await delegate(bus, "stall the line")
            with anyio.fail_after(30):
                await seen.stalled.wait()  # the remote has the message, and has said nothing
            await bus.inboxes.send(task("r1", "", type="shutdown"))
            with anyio.fail_after(10):
                await waiting.wait()  # the relay, cancelled, waits for the task's name
            seen.release.set()
            (result,) = await Lead(bus).until_results(1)
            with anyio.fail_after(10):
                await seen.cancel_seen.wait()
    assert result.meta["reason"] == "shutdown"
    assert seen.stalled_task and seen.cancelled == [seen.stalled_task]


async def test_a_remote_that_never_names_its_task_holds_a_shutdown_only_briefly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(a2a_remote, "NAMING_S", 0.2)
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "stall the line")
        with anyio.fail_after(30):
            await seen.stalled.wait()
        await bus.inboxes.send(task("r1", "", type="shutdown"))
        with anyio.fail_after(4):  # NAMING_S, not the exchange's timeout (300 s)
            (result,) = await Lead(bus).until_results(1)
        seen.release.set()  # the remote's task goes on: nobody could name it
    assert result.meta["reason"] == "shutdown"
    assert seen.cancelled == []


async def test_a_remote_that_never_answers_cancel_task_holds_a_stop_no_longer_than_it_lasts(
    tmp_path: Path,
) -> None:
    async with serve_agent() as (url, seen), MemoryBus() as bus:
        worker = Worker(
            bus,
            {"remote": remote(url)},
            parts=AgentParts(media_dir=tmp_path),
            limits=WorkerLimits(shutdown_timeout_s=1.0),
        )
        async with worker:
            await delegate(bus, "stubborn as a mule")
            await wait_for_event(bus, SESSION, _progress("holding as a mule"), timeout=30)
            stopping = anyio.current_time()
            # leaving drains it: the round is given back at 0.5 s, the stop cut at 1 s
        stopped = anyio.current_time() - stopping
        seen.release.set()
    assert seen.cancel_seen.is_set()  # the remote was told, and never answered
    assert stopped < 5.0, stopped  # the stop's 1 s (and some), not CANCEL_S


async def test_a_stream_broken_off_mid_task_is_followed_again_not_resent(tmp_path: Path) -> None:
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "flaky a fox")
        with anyio.fail_after(30):
            (result,) = await Lead(bus).until_results(1)
    assert result.meta["reason"] == "finished", result.content
    assert result.content == "painted a fox"  # once, though the task was read twice
    assert result.media_urls == [f"{url}/media/a-fox.png"]
    assert [text for text, _, _ in seen.messages] == ["flaky a fox"]  # sent once
    assert seen.methods == ["SendStreamingMessage", "SubscribeToTask"]


async def test_a_failed_task_is_an_error_result_quoting_the_remote(tmp_path: Path) -> None:
    async with serve_agent() as (url, _), hosting(remote(url), tmp_path) as bus:
        await delegate(bus, "fail the exam")
        (result,) = await Lead(bus).until_results(1)
    assert result.meta["reason"] == "error"
    assert "the remote agent failed: cannot do the exam" in result.content


async def test_an_unreachable_remote_is_an_error_result_after_bounded_retries(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    with anyio.fail_after(30):
        async with hosting(remote(url, connect_retries=2), tmp_path) as bus:
            await delegate(bus, "paint a fox")
            (result,) = await Lead(bus).until_results(1)
    assert result.meta["reason"] == "error"
    assert f"the remote A2A agent at {url} could not be reached" in result.content


async def test_a_follow_up_continues_the_remote_context(tmp_path: Path) -> None:
    async with serve_agent() as (url, seen), hosting(remote(url), tmp_path) as bus:
        lead = Lead(bus)
        await delegate(bus, "paint a fox")
        await lead.until_results(1)
        await delegate(bus, "paint a cub")  # the agent had exited: a new run, same memory
        await lead.until_results(2)
    (_, first_context, _), (_, second_context, _) = seen.messages
    assert first_context and second_context == first_context


async def test_without_the_sdk_the_agent_is_refused_naming_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "baton.subagents.a2a_remote", None)  # as if not installed
    async with hosting(remote("http://127.0.0.1:9"), tmp_path) as bus:
        await delegate(bus, "paint a fox")
        (result,) = await Lead(bus).until_results(1)
    assert result.meta["reason"] == "error"
    assert "profile 'remote' is a remote A2A agent" in result.content
    assert "pip install 'baton-orchestrator[a2a]'" in result.content


async def test_a_missing_token_variable_refuses_the_agent(tmp_path: Path) -> None:
    profile = remote("http://127.0.0.1:9", token_env="BATON_TEST_A2A_TOKEN")
    async with hosting(profile, tmp_path) as bus:
        await delegate(bus, "paint a fox")
        (result,) = await Lead(bus).until_results(1)
    assert "$BATON_TEST_A2A_TOKEN is not set" in result.content


async def test_a_remote_s_credentials_stay_out_of_what_the_lead_reads(tmp_path: Path) -> None:
    port = free_port()  # nobody listens there
    url = f"http://agent:s3cret@127.0.0.1:{port}/?token=t0ken"
    with anyio.fail_after(30):
        async with hosting(remote(url, connect_retries=0), tmp_path) as bus:
            await delegate(bus, "paint a fox")
            (result,) = await Lead(bus).until_results(1)
    assert "s3cret" not in result.content and "t0ken" not in result.content, result.content
    assert f"at http://agent:***@127.0.0.1:{port}/?token=*** could not be reached" in (
        result.content
    )


async def test_a_missing_token_variable_is_said_with_the_url_redacted(tmp_path: Path) -> None:
    profile = remote("http://agent:s3cret@127.0.0.1:9", token_env="BATON_TEST_A2A_TOKEN")
    async with hosting(profile, tmp_path) as bus:
        await delegate(bus, "paint a fox")
        (result,) = await Lead(bus).until_results(1)
    assert "s3cret" not in result.content
    assert "at http://agent:***@127.0.0.1:9 needs a token" in result.content

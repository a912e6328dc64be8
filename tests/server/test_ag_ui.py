"""``POST /ag-ui`` in process (the Node client's tests are ``test_ag_ui_client*.py``): the token,
the capabilities, interrupts that expire, agents that work on between runs, follow-ups to a live
session, cancelling, ``Last-Event-ID`` for another thread, and the ASGI app a user mounts."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from ag_ui.core import AgentCapabilities
from starlette.applications import Starlette
from starlette.routing import Mount

from baton.bus.events import RoundStarted, SessionStarted, TextDelta
from baton.bus.memory import MemoryBus
from baton.bus.redis import RedisBus
from baton.server import BatonServer, ServerConfig
from baton.server.ag_ui import routes_if_installed
from baton.server.ag_ui.app import AgUiApp
from baton.server.ag_ui.ledger import ledger_of
from baton.server.state import session_state
from baton.subagents.profiles import load_profiles
from baton.testing import RedisServer
from tests.server.ag_ui_helpers import Json, parse_all, profiles
from tests.server.helpers import serving, sse_events
from tests.support.polling import until

TOKEN = "t0ken-for-the-ag-ui-tests-0123456789"
_threads = itertools.count(1)

QUICK_PUBLISHER = """
[profiles.publisher]
description = "Publishes a text; a person must approve each publication."
system_prompt = "[baton:subagent] Publish the task with publish, then report."
tools = ["publish"]

[profiles.publisher.limits]
approval_timeout_s = 0.5

[profiles.painter]
description = "Paints pictures from a description and returns the image URLs."
system_prompt = "[baton:subagent] Paint the task with generate_image, then report."
tools = ["generate_image"]
"""


def thread() -> str:
    return f"t-{next(_threads)}-{anyio.current_time():.0f}".replace(".", "-")


def user(text: str, number: int = 1) -> Json:
    return {"id": f"u{number}", "role": "user", "content": text}


def body(thread_id: str, messages: list[Json], **more: Any) -> Json:
    return {"threadId": thread_id, "runId": f"r-{next(_threads)}", "messages": messages, **more}


@asynccontextmanager
async def server(tmp: Path, **config: Any) -> AsyncIterator[tuple[BatonServer, httpx2.AsyncClient]]:
    chosen = config.pop("profiles", None) or profiles(tmp)
    async with MemoryBus() as bus:
        settings = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp / "media", **config)
        async with BatonServer(settings, bus=bus, profiles=chosen) as running:
            headers = {"Authorization": f"Bearer {config['token']}"} if "token" in config else {}
            async with httpx2.AsyncClient(
                base_url=running.url, timeout=30, headers=headers
            ) as http:
                yield running, http


async def run(
    http: httpx2.AsyncClient, payload: Json, headers: dict[str, str] | None = None
) -> list[tuple[str | None, Json]]:
    """A whole run: each frame's id and event."""
    frames: list[tuple[str | None, Json]] = []
    async with http.stream("POST", "/ag-ui", json=payload, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for sse in sse_events(response.aiter_lines()):
            if sse.data:
                frames.append((sse.id, sse.json()))
    parse_all(event for _, event in frames)
    return frames


def events(frames: list[tuple[str | None, Json]], kind: str | None = None) -> list[Json]:
    return [event for _, event in frames if kind is None or event["type"] == kind]


def resolved(frames: list[tuple[str | None, Json]]) -> list[Json]:
    found: list[Json] = [
        event["value"]
        for event in events(frames, "CUSTOM")
        if event["name"] == "baton.interrupt.resolved"
    ]
    return found


async def test_the_capabilities_declare_the_sub_agents_and_interrupts(tmp_path: Path) -> None:
    async with server(tmp_path) as (running, http):
        response = await http.get("/ag-ui/capabilities")
    assert response.status_code == 200
    declared = AgentCapabilities.model_validate(response.json())
    assert declared.multi_agent is not None and declared.multi_agent.subagents is not None
    names = {info.name for info in declared.multi_agent.subagents}
    assert names == set(running.ctx.host.profiles) if running.ctx else False
    assert declared.human_in_the_loop is not None and declared.human_in_the_loop.interrupts
    assert "subagents" in response.json()["multiAgent"]  # the 1.0 spelling on the wire


async def test_ag_ui_takes_the_admin_token_and_refuses_the_rest(tmp_path: Path) -> None:
    async with server(tmp_path, token=TOKEN) as (running, http):
        payload = body(thread(), [user("paint a fox")])
        async with httpx2.AsyncClient(base_url=running.url) as stranger:
            refused = await stranger.post("/ag-ui", json=payload)
            assert refused.status_code == 401
            started = await http.post("/sessions", json={"task": "paint a fox"})
            read = started.json()["tokens"]["write"]
            scoped = await stranger.post(
                "/ag-ui", json=payload, headers={"Authorization": f"Bearer {read}"}
            )
            assert scoped.status_code == 403 and "admin token" in scoped.json()["detail"]
        frames = await run(http, payload)
    assert events(frames)[0]["type"] == "RUN_STARTED"
    assert events(frames)[-1]["type"] == "RUN_FINISHED"


async def test_an_interrupt_that_expired_is_reported_as_expired_never_as_declined(
    tmp_path: Path,
) -> None:
    """The late answer may come while the session runs on, or after it ended (the agent went on
    without the approval and finished): either way it is reported as the expiry it was (the
    next test makes the second order certain)."""
    profiles_file = tmp_path / "quick.toml"
    profiles_file.write_text(QUICK_PUBLISHER)
    async with server(tmp_path, profiles=load_profiles(profiles_file)) as (running, http):
        thread_id = thread()
        asked = await run(http, body(thread_id, [user("publish a haiku")]))
        [interrupt] = events(asked)[-1]["outcome"]["interrupts"]
        assert running.ctx is not None
        log = running.ctx.bus.log

        async def decided() -> bool:
            state = await session_state(log, thread_id)
            return not state.pending_approvals and state.events > 0

        await until(decided, "the approval to expire")
        resume = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        late = await run(http, body(thread_id, [user("publish a haiku")], resume=resume))
    ignored = [e["value"] for e in events(late, "CUSTOM") if e["name"] == "baton.resume.ignored"]
    assert ignored == [{"interruptId": interrupt["id"], "why": ignored[0]["why"], "expired": True}]
    assert "expired" in ignored[0]["why"]
    assert [value["outcome"] for value in resolved(late)] == ["expired"]
    assert events(late)[-1]["type"] == "RUN_FINISHED"


async def test_a_late_answer_to_an_expired_interrupt_is_an_expiry_once_the_session_ended_too(
    tmp_path: Path,
) -> None:
    """The other order of the test above, made certain: the approval expires, the agent goes on
    without it and the session ends; the answer that comes after all that is still reported as
    the expiry it was (not as "the session has ended", nor as a decline)."""
    profiles_file = tmp_path / "quick.toml"
    profiles_file.write_text(QUICK_PUBLISHER)
    async with server(tmp_path, profiles=load_profiles(profiles_file)) as (running, http):
        thread_id = thread()
        asked = await run(http, body(thread_id, [user("publish a haiku")]))
        [interrupt] = events(asked)[-1]["outcome"]["interrupts"]
        assert running.ctx is not None
        host = running.ctx.host

        async def ended() -> bool:
            return not host.is_hosted(thread_id)

        await until(ended, "the session to end, its approval expired")
        resume = [{"interruptId": interrupt["id"], "status": "resolved",
                   "payload": {"approved": True}}]  # fmt: skip
        late = await run(http, body(thread_id, [user("publish a haiku")], resume=resume))
    ignored = [e["value"] for e in events(late, "CUSTOM") if e["name"] == "baton.resume.ignored"]
    assert ignored == [{"interruptId": interrupt["id"], "why": ignored[0]["why"], "expired": True}]
    assert "expired" in ignored[0]["why"]
    assert events(late)[-1]["type"] == "RUN_FINISHED"


async def test_the_sessions_of_a_thread_never_share_an_interrupt_id(tmp_path: Path) -> None:
    """Each session's model numbers its calls anew, so the thread's second session may ask to
    publish under the gated call's id the first one used. The interrupt ids name the session:
    an answer to the first session's (approved, its session ended) is refused as answered there,
    and the second's is answered in its own session."""
    async with server(tmp_path) as (_running, http):
        thread_id = thread()
        history = [user("publish a haiku")]
        asked = await run(http, body(thread_id, history))
        [first] = events(asked)[-1]["outcome"]["interrupts"]
        approve = {"status": "resolved", "payload": {"approved": True}}
        done = await run(http, body(thread_id, history,
                                    resume=[{"interruptId": first["id"], **approve}]))  # fmt: skip
        assert "outcome" not in events(done)[-1]  # the session went on, and ended
        history.append(user("publish another haiku", 2))
        again = await run(http, body(thread_id, history))
        [second] = events(again)[-1]["outcome"]["interrupts"]
        both = [{"interruptId": first["id"], **approve}, {"interruptId": second["id"], **approve}]
        answered = await run(http, body(thread_id, history, resume=both))
    assert first["id"].startswith(f"{thread_id}:")
    assert second["id"].startswith(f"{thread_id}.t2:") and second["id"] != first["id"]
    ignored = [
        e["value"] for e in events(answered, "CUSTOM") if e["name"] == "baton.resume.ignored"
    ]
    assert [(v["interruptId"], v["expired"]) for v in ignored] == [(first["id"], False)]
    assert f"already answered in session {thread_id} (approved)" in ignored[0]["why"]
    assert [(v["interruptId"], v["outcome"]) for v in resolved(answered)] == [
        (second["id"], "approved")
    ]
    assert events(answered)[-1]["type"] == "RUN_FINISHED"


async def test_agents_that_wait_for_nobody_work_on_and_the_next_run_shows_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tmp_path / "release"
    monkeypatch.setenv("BATON_TEST_RELEASE", str(release))  # the surveyor holds until it exists
    async with server(tmp_path) as (running, http):
        thread_id = thread()
        history = [user("publish a haiku and survey the north")]
        asked = await run(http, body(thread_id, history))
        assert events(asked)[-1]["outcome"]["type"] == "interrupt"
        release.touch()  # between the runs, with nobody connected, the surveyor finishes
        assert running.ctx is not None
        log = running.ctx.bus.log

        async def surveyed() -> bool:
            state = await session_state(log, thread_id)
            return any(a.name == "north" and a.status == "done" for a in state.agents)

        await until(surveyed, "the surveyor to finish while the publisher waits")
        [interrupt] = events(asked)[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": interrupt["id"], "status": "resolved",
                   "payload": {"approved": True}}]  # fmt: skip
        answered = await run(http, body(thread_id, history, resume=resume))
    north = next(e for e in events(asked, "SUBAGENT_STARTED") if e["name"] == "north")
    suspended = [
        e
        for e in events(asked, "SUBAGENT_FINISHED")
        if e["subagentRunId"] == north["subagentRunId"]
    ]
    assert suspended == [{"type": "SUBAGENT_FINISHED", "subagentRunId": north["subagentRunId"],
                          "outcome": {"type": "suspended"}}]  # fmt: skip
    finished = [
        e
        for e in events(answered, "SUBAGENT_FINISHED")
        if e["subagentRunId"] == north["subagentRunId"]
    ]
    assert len(finished) == 1 and "survey the north" in finished[0]["result"]["content"]
    ids = [i for i, _ in asked if i] + [i for i, _ in answered if i]
    assert len(ids) == len(set(ids))  # nothing the first run sent comes again
    assert events(answered)[-1]["type"] == "RUN_FINISHED"


async def test_a_new_message_on_a_live_session_reaches_its_lead_and_a_drop_cancels_nothing(
    tmp_path: Path,
) -> None:
    async with server(tmp_path) as (running, http):
        thread_id = thread()
        first = [user("sleep on the plan")]
        async with http.stream("POST", "/ag-ui", json=body(thread_id, first)) as response:
            async for sse in sse_events(response.aiter_lines()):
                if sse.data and sse.json()["type"] == "SUBAGENT_STARTED":
                    break  # the client goes away mid-run
        assert running.ctx is not None
        assert running.ctx.host.is_hosted(thread_id)  # a closed connection is not a cancel
        both = [*first, user("paint a fox", 2)]
        async with http.stream("POST", "/ag-ui", json=body(thread_id, both)) as response:
            seen: list[Json] = []
            async for sse in sse_events(response.aiter_lines()):
                if not sse.data:
                    continue
                seen.append(sse.json())
                if seen[-1]["type"] == "SUBAGENT_STARTED" and seen[-1]["name"] == "painter":
                    break
        stop = await run(http, body(thread_id, both, forwardedProps={"baton": {"cancel": True}}))
    snapshot = next(e for e in seen if e["type"] == "STATE_SNAPSHOT")["snapshot"]
    assert snapshot["session"] == thread_id  # the same session: a follow-up, not a new one
    assert events(stop)[-1]["outcome"] == {"type": "cancelled"}
    opened = {e["subagentRunId"] for e in events(stop, "SUBAGENT_STARTED")}
    closed = {e["subagentRunId"] for e in events(stop, "SUBAGENT_ERROR")}
    closed |= {e["subagentRunId"] for e in events(stop, "SUBAGENT_FINISHED")}
    assert opened == closed


async def test_only_the_server_that_runs_a_session_cancels_it(tmp_path: Path) -> None:
    async with MemoryBus() as bus:
        first = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp_path / "media")
        async with (
            BatonServer(first, bus=bus, profiles=profiles(tmp_path)) as owner,
            BatonServer(first, bus=bus, profiles=profiles(tmp_path)) as other,
            httpx2.AsyncClient(base_url=owner.url, timeout=30) as at_owner,
            httpx2.AsyncClient(base_url=other.url, timeout=30) as at_other,
        ):
            thread_id = thread()
            history = [user("sleep on the plan")]
            async with at_owner.stream("POST", "/ag-ui", json=body(thread_id, history)) as r:
                async for sse in sse_events(r.aiter_lines()):
                    if sse.data and sse.json()["type"] == "SUBAGENT_STARTED":
                        break
            cancel = body(thread_id, history, forwardedProps={"baton": {"cancel": True}})
            refused = await at_other.post("/ag-ui", json=cancel)
            stopped = await run(at_owner, cancel)
    assert refused.status_code == 409 and "another process" in refused.json()["detail"]
    assert events(stopped)[-1]["outcome"] == {"type": "cancelled"}


async def test_last_event_id_zero_replays_the_thread_and_another_threads_is_refused(
    tmp_path: Path,
) -> None:
    async with server(tmp_path) as (_, http):
        thread_id = thread()
        history = [user("paint a fox")]
        whole = await run(http, body(thread_id, history))
        again = await run(http, body(thread_id, history), headers={"Last-Event-ID": "0"})
        nothing_new = await run(http, body(thread_id, history))
        other = await http.post(
            "/ag-ui", json=body(thread_id, history), headers={"Last-Event-ID": "elsewhere:1"}
        )
    assert [i for i, _ in whole if i] == [i for i, _ in again if i]
    assert [i for i, _ in nothing_new if i] == []  # it holds everything: nothing is sent again
    assert events(nothing_new)[-1]["type"] == "RUN_FINISHED"
    assert other.status_code == 400 and "not of thread" in other.json()["detail"]


async def test_the_ag_ui_app_mounts_in_a_starlette_app(tmp_path: Path) -> None:
    config = ServerConfig(media_dir=tmp_path / "media")
    endpoint = AgUiApp(config, profiles=profiles(tmp_path))
    app = Starlette(routes=[Mount("/agent", app=endpoint)])
    transport = httpx2.ASGITransport(app=app)
    async with endpoint, httpx2.AsyncClient(transport=transport, base_url="http://app") as http:
        capabilities = await http.get("/agent/capabilities")
        response = await http.post("/agent/", json=body(thread(), [user("paint a fox")]))
        frames = [sse async for sse in sse_events(_lines(response.text))]
        finished = [f.json() for f in frames if f.data][-1]
        [url] = finished["result"]["mediaUrls"]
        picture = await http.get(url)
    assert capabilities.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert finished["type"] == "RUN_FINISHED"
    assert url.startswith("http://app/agent/media/")
    assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"


async def _lines(text: str) -> AsyncIterator[str]:
    for line in text.split("\n"):
        yield line


async def test_without_the_ag_ui_extra_the_server_runs_without_the_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ag_ui" else real(name, *a)
    )
    assert routes_if_installed() == []
    async with server(tmp_path) as (_, http):
        missing = await http.post("/ag-ui", json=body(thread(), [user("paint a fox")]))
        assert (await http.get("/healthz")).status_code == 200
    assert missing.status_code == 404


async def test_every_user_message_since_the_agent_last_spoke_is_taken_once(tmp_path: Path) -> None:
    async with server(tmp_path) as (_, http):
        thread_id = thread()
        said = [user("paint a fox", 1), user("paint a heron", 2)]
        first = await run(http, body(thread_id, said))
        again = await run(http, body(thread_id, said))  # the same history: nothing new is taken
    task = next(
        op["value"]
        for e in events(first, "STATE_DELTA")
        for op in e["delta"]
        if op["path"] == "/task"
    )
    assert task == "paint a fox\n\npaint a heron"
    assert {e["name"] for e in events(first, "SUBAGENT_STARTED")} == {"painter", "painter-2"}
    assert events(again, "SUBAGENT_STARTED") == [] and events(again)[-1]["type"] == "RUN_FINISHED"


async def test_a_bus_gone_past_its_outage_bound_ends_the_run_with_run_error(
    tmp_path: Path,
) -> None:
    session = "s-ag-ui-outage"
    with RedisServer() as redis:
        async with RedisBus(redis.url, prefix="ag-ui-outage") as bus:
            await bus.log.emit(SessionStarted(session=session, agent="lead", task="x"))
            await bus.log.emit(RoundStarted(session=session, agent="lead", round=1))
            async with serving(bus, tmp_path, bus_outage_s=1) as running:
                async with httpx2.AsyncClient(base_url=running.url, timeout=30) as http:
                    payload = body(session, [])  # the session's thread: the client comes back
                    async with http.stream("POST", "/ag-ui", json=payload) as response:
                        seen: list[Json] = []
                        async for sse in sse_events(response.aiter_lines()):
                            if not sse.data:
                                continue
                            seen.append(sse.json())
                            if seen[-1]["type"] == "STATE_DELTA" and len(seen) == 3:
                                await bus.log.emit(
                                    TextDelta(session=session, agent="lead", text="hello")
                                )
                            if seen[-1]["type"] == "TEXT_MESSAGE_CONTENT":
                                redis.kill()  # and it stays down past the bound
    assert [e["type"] for e in seen][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    error = seen[-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "BusOutage"
    assert "\n" not in error["message"]


async def test_a_cancel_while_an_interrupt_is_pending_ends_the_run_cancelled_and_closes_it(
    tmp_path: Path,
) -> None:
    """The client must address a pending interrupt in every run (the spec's coverage rule), so
    its cancel carries a resume entry: nothing is answered, the session is cancelled, and the
    run follows it to its end — the question closed on the bus and in the stream, the run
    finished as cancelled, nothing left open or running."""
    async with server(tmp_path) as (running, http):
        thread_id = thread()
        history = [user("publish a haiku")]
        asked = await run(http, body(thread_id, history))
        [interrupt] = events(asked)[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        options = {"baton": {"cancel": True}}
        stop = await run(http, body(thread_id, history, resume=resume, forwardedProps=options))
        assert running.ctx is not None
        host, bus = running.ctx.host, running.ctx.bus

        async def left() -> bool:
            return not host.is_hosted(thread_id)

        await until(left, "the cancelled session to leave")
        book = (await ledger_of(bus, thread_id)).book
        again = await run(http, body(thread_id, history))
    assert events(stop)[-1]["type"] == "RUN_FINISHED"
    assert events(stop)[-1]["outcome"] == {"type": "cancelled"}
    ignored = [e["value"] for e in events(stop, "CUSTOM") if e["name"] == "baton.resume.ignored"]
    assert [value["interruptId"] for value in ignored] == [interrupt["id"]]
    assert [(v["interruptId"], v["outcome"]) for v in resolved(stop)] == [
        (interrupt["id"], "closed")
    ]
    assert book.open() == []
    [snapshot] = events(again, "STATE_SNAPSHOT")
    assert (
        snapshot["snapshot"]["openInterrupts"] == []
        and snapshot["snapshot"]["status"] == "cancelled"
    )
    assert events(again)[-1]["outcome"] == {"type": "cancelled"}

"""``POST /sessions/{id}/questions/{question_id}`` over real HTTP: one route answers every question
an agent asks a person (docs/questions.md), and ``GET /state`` lists what is open.

The built-in ``reviewer`` asks for a file with the offline model, on the in-process bus and on
Redis. Questions whose shape the offline model never asks (a type it accepts, an image) are
written into the session's log as an agent would log them, so the route's checks are shown on
exactly the question they guard; the answer an agent would read is then read from its inbox.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from baton.bus.base import Bus
from baton.bus.events import (
    AgentResult,
    QuestionAnswered,
    QuestionAsked,
    SessionFinished,
    SessionStarted,
    utc_now,
)
from baton.bus.payloads import QuestionReply
from baton.engine.bus_channel import approvals_inbox
from baton.server import BatonServer, ServerConfig
from baton.subagents.png import picture_for
from baton.subagents.profiles import builtin_profiles
from tests.conftest import BusFactory
from tests.server.helpers import TOKEN, client, start_session
from tests.support.events import wait_for_event

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def reviewing(bus: Bus, tmp: Path, **config: Any) -> AsyncIterator[BatonServer]:
    """A server whose sessions may use the built-in profiles (the ``reviewer`` among them)."""
    settings = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp / "media", **config)
    async with BatonServer(settings, bus=bus, profiles=builtin_profiles()) as server:
        yield server


async def _asked(bus: Bus, session: str) -> QuestionAsked:
    return await wait_for_event(bus, session, QuestionAsked)


def _route(session: str, question: str) -> str:
    return f"/sessions/{session}/questions/{question}"


async def test_an_uploaded_file_is_stored_used_and_the_question_answered_once(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        reviewing(bus, tmp_path, upload_max_bytes=64) as server,
        client(server) as http,
    ):
        session = await start_session(http, "review my notes", profiles=["reviewer"])
        asked = await _asked(bus, session)
        route = _route(session, asked.question_id)

        state = (await http.get(f"/sessions/{session}/state")).json()
        [shown] = state["open_questions"]
        assert shown["id"] == asked.question_id and shown["kind"] == "upload"
        assert shown["agent"] == "reviewer" and shown["tool"] == "request_file_upload"
        assert shown["message"] == "review my notes" and shown["expires_at"]

        too_big = await http.post(route, files={"file": ("big.txt", b"x" * 65, "text/plain")})
        assert too_big.status_code == 413 and "64 bytes" in too_big.json()["detail"]
        unknown = await http.post(
            _route(session, "q-nope"), files={"file": ("n.txt", b"hi", "text/plain")}
        )
        assert unknown.status_code == 404 and "no such question" in unknown.json()["detail"]
        no_part = await http.post(route, files={"other": ("n.txt", b"hi", "text/plain")})
        assert no_part.status_code == 422 and "named 'file'" in no_part.json()["detail"]
        as_text = await http.post(route, content=b"hello", headers={"content-type": "text/plain"})
        assert as_text.status_code == 415
        local = await http.post(route, json={"url": "file:///etc/passwd"})
        assert local.status_code == 422 and "upload the file" in local.json()["detail"]
        assert not list((tmp_path / "media").rglob("*upload*"))  # nothing stored yet

        notes = b"a heron, a fox\n"
        answered = await http.post(route, files={"file": ("../../notes.txt", notes, "text/plain")})
        assert answered.status_code == 200, answered.text
        body = answered.json()
        assert body["outcome"] == "provided" and body["agent"] == "reviewer"
        [stored] = (tmp_path / "media").rglob("reviewer-upload-*-notes.txt")
        assert stored.read_bytes() == notes and body["url"] == stored.as_uri()
        assert stored.is_relative_to((tmp_path / "media" / session).resolve())

        logged = await wait_for_event(bus, session, QuestionAnswered)
        assert logged.outcome == "provided" and logged.url == stored.as_uri()
        result = await wait_for_event(bus, session, AgentResult)
        assert stored.as_uri() in result.media_urls  # the agent used the file
        finished = await wait_for_event(bus, session, SessionFinished)
        assert finished.status == "completed" and stored.as_uri() in finished.media_urls

        again = await http.post(route, json={"cancel": True})
        assert again.status_code == 409 and "already answered" in again.json()["detail"]
        assert (await http.get(f"/sessions/{session}/state")).json()["open_questions"] == []


async def test_a_cancel_declines_the_tool_and_the_agent_says_so(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "review my notes", profiles=["reviewer"])
        asked = await _asked(bus, session)
        both = await http.post(
            _route(session, asked.question_id), json={"cancel": True, "url": "https://x.y/a"}
        )
        assert both.status_code == 422 and "exactly one of" in both.json()["detail"]
        decision = await http.post(_route(session, asked.question_id), json={"approved": True})
        assert decision.status_code == 422 and "asks for a file" in decision.json()["detail"]

        cancelled = await http.post(
            _route(session, asked.question_id), json={"cancel": True, "reason": "not today"}
        )
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["outcome"] == "cancelled"
        answered = await wait_for_event(bus, session, QuestionAnswered)
        assert answered.outcome == "cancelled"
        result = await wait_for_event(bus, session, AgentResult)
        assert result.content.startswith("Not done") and "the user cancelled" in result.content
        assert not result.media_urls


async def test_an_approval_is_listed_and_answered_by_the_same_route(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "publish a haiku", profiles=["publisher"])
        state_url = f"/sessions/{session}/state"

        async def listed() -> list[dict[str, Any]]:
            questions: list[dict[str, Any]] = (await http.get(state_url)).json()["open_questions"]
            return questions

        with anyio.fail_after(20):
            while not (questions := await listed()):  # noqa: ASYNC110 (the state route: polled)
                await anyio.sleep(0.05)
        [approval] = questions
        assert approval["kind"] == "approval" and approval["tool"] == "publish"
        assert approval["id"] == approval["call_id"] and approval["agent"] == "publisher"
        file = await http.post(
            _route(session, approval["id"]), json={"url": "https://example.com/a.png"}
        )
        assert file.status_code == 422 and "approve or decline" in file.json()["detail"]
        approved = await http.post(_route(session, approval["id"]), json={"approved": True})
        assert approved.status_code == 200, approved.text
        assert approved.json()["outcome"] == "approved"
        finished = await wait_for_event(bus, session, SessionFinished)
        assert finished.status == "completed"
        again = await http.post(_route(session, approval["id"]), json={"approved": False})
        assert again.status_code == 409 and "already decided" in again.json()["detail"]


async def _logged_question(bus: Bus, session: str, **fields: Any) -> QuestionAsked:
    """A question as an agent logs it, for a session that only needs a log."""
    await bus.log.emit(SessionStarted(session=session, agent="lead", task="look", model="m"))
    asked = QuestionAsked(
        session=session, agent="looker", question_id="q1", call_id="c1",
        expires_at=utc_now() + timedelta(minutes=3), **fields,
    )  # fmt: skip
    await bus.log.emit(asked)
    return asked


async def _answer_sent(bus: Bus, session: str, agent: str) -> QuestionReply:
    [envelope] = await bus.inboxes.read(session, approvals_inbox(agent))
    return QuestionReply.model_validate(envelope.meta)


async def test_a_type_the_question_does_not_accept_is_refused_and_nothing_stored(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path) as server, client(server) as http:
        await _logged_question(bus, "s-typed", kind="upload", accept=["image/png", ".csv"])
        route = _route("s-typed", "q1")
        wrong = await http.post(route, files={"file": ("notes.txt", b"hi", "text/plain")})
        assert wrong.status_code == 422 and "accepts image/png, .csv" in wrong.json()["detail"]
        url = await http.post(route, json={"url": "https://example.com/notes.txt"})
        assert url.status_code == 422
        assert not (tmp_path / "media").exists() or not list((tmp_path / "media").rglob("*"))

        table = await http.post(route, files={"file": ("t.csv", b"a,b\n", "text/csv")})
        assert table.status_code == 200, table.text
        reply = await _answer_sent(bus, "s-typed", "looker")
        assert reply.outcome == "provided" and reply.url == table.json()["url"]
        assert reply.name == "t.csv" and reply.media_type == "text/csv"


async def test_an_image_is_picked_from_the_session_s_own_media_and_no_other(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path) as server, client(server) as http:
        await _logged_question(bus, "s-pick", kind="image", reference="the fox")
        media = tmp_path / "media"
        for session in ("s-pick", "s-other"):
            (media / session).mkdir(parents=True)
            (media / session / "fox.png").write_bytes(picture_for("a fox"))
        (media / "s-pick" / "notes.txt").write_text("not a picture")
        route = _route("s-pick", "q1")

        for path in ("/media/s-other/fox.png", "/media/s-pick/../s-other/fox.png",
                     "/media/s-pick/missing.png", "/etc/passwd"):  # fmt: skip
            refused = await http.post(route, json={"media": path})
            assert refused.status_code == 422, (path, refused.text)
            assert "no file of session s-pick" in refused.json()["detail"]
        text = await http.post(route, json={"media": "/media/s-pick/notes.txt"})
        assert text.status_code == 422 and "not a PNG, JPEG, WebP or GIF" in text.json()["detail"]

        picked = await http.post(route, json={"media": "/media/s-pick/fox.png"})
        assert picked.status_code == 200, picked.text
        reply = await _answer_sent(bus, "s-pick", "looker")
        assert reply.outcome == "provided" and reply.media_type == "image/png"
        [copy] = media.rglob("looker-upload-*-fox.png")
        assert reply.url == copy.as_uri() and copy.read_bytes() == picture_for("a fox")


async def test_an_expired_question_is_refused_as_expired(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path) as server, client(server) as http:
        await bus.log.emit(SessionStarted(session="s-late", agent="lead", task="t", model="m"))
        await bus.log.emit(
            QuestionAsked(session="s-late", agent="looker", question_id="q1", call_id="c1",
                          kind="upload", expires_at=utc_now() - timedelta(seconds=1))
        )  # fmt: skip
        late = await http.post(_route("s-late", "q1"), json={"url": "https://example.com/a"})
        assert late.status_code == 409 and "expired" in late.json()["detail"]
        state = (await http.get("/sessions/s-late/state")).json()
        assert state["open_questions"] == []


async def test_an_upload_by_cookie_must_come_from_the_server_s_own_page(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path, token=TOKEN) as server:
        await _logged_question(bus, "s-site", kind="upload")
        route = _route("s-site", "q1")
        file = {"file": ("n.txt", b"hi", "text/plain")}
        cookie = {"baton_token": TOKEN}
        own = server.url.replace("0.0.0.0", "127.0.0.1")
        async with client(server, cookies=cookie) as http:
            for headers in (
                {"origin": "http://127.0.0.1:1"},
                {},  # a browser names its origin on every POST: a cookie without one is suspect
                {"sec-fetch-site": "same-site", "origin": own},  # another port of localhost
            ):
                refused = await http.post(route, files=file, headers=headers)
                assert refused.status_code == 403, (headers, refused.text)
                assert "own page" in refused.json()["detail"]
            empty = await http.post(f"{route}?token=", files=file,
                                    headers={"origin": "http://127.0.0.1:1"})  # fmt: skip
            assert empty.status_code == 403  # an empty token names nothing: the cookie counts
            proxied = await http.post(
                route,
                files=file,
                headers={"sec-fetch-site": "same-origin", "origin": "https://front"},
            )
            assert proxied.status_code == 200, proxied.text  # behind a proxy that rewrote Host
        async with client(server) as http:  # no token at all
            assert (await http.post(route, files=file)).status_code == 401


async def test_a_server_without_a_token_takes_no_upload_from_another_site(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, reviewing(bus, tmp_path) as server, client(server) as http:
        await _logged_question(bus, "s-open", kind="upload")
        route = _route("s-open", "q1")
        file = {"file": ("n.txt", b"hi", "text/plain")}
        other = await http.post(route, files=file, headers={"origin": "http://evil.example"})
        assert other.status_code == 403
        program = await http.post(route, files=file)  # curl: no Origin, no cookie
        assert program.status_code == 200, program.text


async def test_a_read_only_session_token_cannot_answer(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        reviewing(bus, tmp_path, token=TOKEN) as server,
        client(server, headers={"authorization": f"Bearer {TOKEN}"}) as admin,
    ):
        started = await admin.post(
            "/sessions", json={"task": "review my notes", "profiles": ["reviewer"]}
        )
        session, tokens = started.json()["id"], started.json()["tokens"]
        asked = await _asked(bus, session)
        route = _route(session, asked.question_id)
        read = {"authorization": f"Bearer {tokens['read']}"}
        async with client(server, headers=read) as reader:
            refused = await reader.post(route, json={"cancel": True})
        assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
        write = {"authorization": f"Bearer {tokens['write']}"}
        async with client(server, headers=write) as writer:
            answered = await writer.post(route, json={"cancel": True})
        assert answered.status_code == 200, answered.text

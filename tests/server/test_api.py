"""The JSON API over real HTTP: starting, state, list, posting, approvals, bodies, media."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from baton.bus.events import SessionStarted
from tests.conftest import BusFactory
from tests.server.helpers import client, read_all, serving, start_session, stream


async def test_start_state_list_and_media(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "paint a fox", profiles=["painter"])
        events = await read_all(http, session)
        assert events[-1].json()["status"] == "completed"

        state = (await http.get(f"/sessions/{session}/state")).json()
        assert state["status"] == "completed" and state["task"] == "paint a fox"
        assert state["offline"] is True and state["text"]
        (painter,) = state["agents"]
        assert painter["name"] == "painter" and painter["status"] == "done"
        (image,) = painter["media_urls"]
        assert image.startswith(f"/media/{session}/") and image.endswith(".png")
        png = await http.get(image)
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG")
        assert png.headers["x-content-type-options"] == "nosniff"

        listed = (await http.get("/sessions")).json()["sessions"]
        assert [row["id"] for row in listed][:1] == [session]
        assert listed[0]["status"] == "completed"
        assert (await http.get("/sessions/s-unknown/state")).status_code == 404
        assert (await http.get("/sessions?limit=0")).status_code == 422


async def test_approval_over_the_api_lets_the_session_continue(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "publish the news", profiles=["publisher"])
        async with stream(http, session) as (_, events):
            async for event in events:
                if event.event == "approval.requested":
                    call_id = event.json()["calls"][0]["call_id"]
                    break
        answer = await http.post(f"/sessions/{session}/approvals/{call_id}",
                                 json={"approved": True, "reason": "ship it"})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"call_id": call_id, "approved": True, "agent": "publisher"}
        logged = await read_all(http, session)
        results = [e.json()["result"]["content"] for e in logged if e.event == "tool.result"]
        assert any(text.startswith("published") for text in results)
        assert logged[-1].json()["status"] == "completed"
        again = await http.post(
            f"/sessions/{session}/approvals/{call_id}", json={"approved": False}
        )
        assert again.status_code == 409 and "already decided" in again.json()["detail"]
        unknown = await http.post(f"/sessions/{session}/approvals/nope", json={"approved": True})
        assert unknown.status_code == 404


async def test_post_reaches_the_inbox_and_cancel_needs_the_owner(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        # A session another process runs: its log is on the bus, it does not run here.
        await bus.log.emit(
            SessionStarted(session="s-elsewhere", agent="lead", task="paint", model="m")
        )
        await bus.records.hold_lead("s-elsewhere", "elsewhere", 30, {"status": "running"})
        posted = await http.post("/sessions/s-elsewhere/messages",
                                 json={"content": "also a cat", "to": "painter"})  # fmt: skip
        assert posted.status_code == 202
        (envelope,) = await bus.inboxes.read("s-elsewhere", "painter")
        assert envelope.id == posted.json()["id"] and envelope.content == "also a cat"
        assert envelope.sender == "user" and envelope.type == "task"
        # Its lead answered and read its last (docs/protocol.md, closing): refused, not lost.
        await bus.records.hold_lead("s-elsewhere", "elsewhere", 30, {"status": "closing"})
        late = await http.post("/sessions/s-elsewhere/messages", json={"content": "and a dog"})
        assert late.status_code == 409 and "not running (closing)" in late.json()["detail"]
        cancel = await http.post("/sessions/s-elsewhere/cancel")
        assert cancel.status_code == 404


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"task": ""}, "task: String should have at least 1 character"),
        ({}, "task: Field required"),
        ({"task": 42}, "task: Input should be a valid string"),
        ({"task": "x", "approve": "maybe"}, "approve: Input should be 'ask', 'auto' or 'deny'"),
        ({"task": "x", "surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"task": "x", "profiles": ["nobody"]}, "profiles: unknown profile 'nobody'"),
        ({"task": "x", "timeout_s": -1}, "timeout_s: Input should be greater than 0"),
    ],
)
async def test_bad_bodies_get_422_with_a_clear_message(
    make_bus: BusFactory, tmp_path: Path, body: dict[str, object], where: str
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        response = await http.post("/sessions", json=body)
        assert response.status_code == 422
        assert response.json()["detail"].startswith(where)


async def test_bodies_must_be_json_and_small(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        garbled = await http.post("/sessions", content=b"{nope",
                                  headers={"content-type": "application/json"})  # fmt: skip
        assert garbled.status_code == 422
        assert garbled.json()["detail"].startswith("the body is not valid JSON")
        form = await http.post("/sessions", data={"task": "x"})
        assert form.status_code == 415
        big = await http.post("/sessions", json={"task": "x" * 70_000})
        assert big.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            for _ in range(100):
                yield b" " * 1024

        streamed = await http.post("/sessions", content=chunks(),
                                   headers={"content-type": "application/json"})  # fmt: skip
        assert streamed.status_code == 413
        post = await http.post("/sessions/s-1/messages", json={"content": "hi", "type": "result"})
        assert post.status_code == 422 and post.json()["detail"].startswith("type:")
        decide = await http.post("/sessions/s-1/approvals/c1", json={"approved": "perhaps"})
        assert decide.status_code == 422 and decide.json()["detail"].startswith("approved:")


async def test_media_cannot_leave_the_media_directory(make_bus: BusFactory, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        media = tmp_path / "media"
        (media / "s-1").mkdir()
        (media / "s-1" / "ok.png").write_bytes(b"\x89PNG fake")
        os.symlink(secret, media / "s-1" / "link.png")
        assert (await http.get("/media/s-1/ok.png")).status_code == 200
        base = server.url.replace("0.0.0.0", "127.0.0.1")
        for path in [
            "/media/../secret.txt",
            "/media/%2e%2e/secret.txt",
            "/media/s-1/..%2f..%2fsecret.txt",
            "/media/%2fetc%2fpasswd",
            "/media//etc/passwd",
            "/media/s-1/link.png",
            "/media/s-1",
            "/media/s-1/missing.png",
        ]:
            # Sent as written: no client-side normalisation of the dots.
            request = httpx2.Request("GET", base + path)
            request.url = httpx2.URL(base + path)
            response = await http.send(request)
            assert response.status_code == 404, path
            assert b"top secret" not in response.content


async def test_openapi_describes_every_route(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        document = (await http.get("/openapi.json")).json()
        assert document["openapi"].startswith("3.")
        assert set(document["paths"]) >= {
            "/sessions", "/sessions/{id}/events", "/sessions/{id}/state",
            "/sessions/{id}/messages", "/sessions/{id}/approvals/{call_id}",
        }  # fmt: skip
        start = document["components"]["schemas"]["StartSession"]
        assert start["required"] == ["task"] and "profiles" in start["properties"]

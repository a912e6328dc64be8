"""Session tokens over real HTTP (docs/http.md, *Session tokens*): a session's own tokens open
that session only — its state, its stream, its page and media — read-only or read-write; the
admin token opens everything; a second server on the same bus honours them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from redis.asyncio import Redis

from baton.bus.errors import BusUnreachable
from baton.bus.events import SessionStarted
from baton.bus.memory import MemoryBus
from baton.bus.redis import RedisBus
from baton.server.access import SECRET_BYTES, Grant, digest, session_of
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.server.helpers import TOKEN, client, read_all, serving, stream
from tests.support.parts import before

ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def start(http: httpx2.AsyncClient, task: str, **body: Any) -> tuple[str, dict[str, str]]:
    """Start a session as the admin: its id and its tokens."""
    response = await http.post("/sessions", json={"task": task, **body}, headers=ADMIN)
    assert response.status_code == 201, response.text
    started = response.json()
    return started["id"], started["tokens"]


async def pending_call(http: httpx2.AsyncClient, session: str, token: str) -> str:
    """The call id of the session's first approval request, read from its stream."""
    async with stream(http, session, bearer(token)) as (response, events):
        assert response.status_code == 200
        async for event in events:
            if event.event == "approval.requested":
                call_id: str = event.json()["calls"][0]["call_id"]
                return call_id
    raise AssertionError(f"session {session} asked for no approval")


async def test_a_session_token_opens_its_session_and_no_other(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        client(server) as http,
    ):
        first, mine = await start(http, "publish the news", profiles=["publisher"])
        other, theirs = await start(http, "publish the weather", profiles=["publisher"])
        assert set(mine) == {"read", "write"} and mine["read"] != mine["write"]
        for token in (*mine.values(), *theirs.values()):
            assert TOKEN not in token
        assert mine["read"].startswith(f"{first}~")
        assert len(mine["read"].split("~", 1)[1]) >= SECRET_BYTES * 4 // 3  # 32 bytes, base64
        # Only digests are kept: the token itself is no key of the record.
        assert await bus.store.get(first, "tokens", digest(mine["read"])) == "read"
        assert await bus.store.get(first, "tokens", digest(mine["write"])) == "write"
        assert await bus.store.get(first, "tokens", mine["read"]) is None

        read, write = bearer(mine["read"]), bearer(mine["write"])
        # Its own session: state, stream (the first event is the session's start), page.
        state = await http.get(f"/sessions/{first}/state", headers=read)
        assert state.status_code == 200 and state.json()["task"] == "publish the news"
        call_id = await pending_call(http, first, mine["read"])
        assert (await http.get(f"/sessions/{first}", headers=read)).status_code == 200

        # Another session: JSON, stream (header or query, as an EventSource sends it), page.
        for path in (f"/sessions/{other}/state", f"/sessions/{other}/events", f"/sessions/{other}"):
            refused = await http.get(path, headers=read)
            assert refused.status_code == 403, (path, refused.text)
            assert f"for session {first!r} only" in refused.json()["detail"]
        async with http.stream("GET", f"/sessions/{other}/events?token={mine['read']}") as sse:
            assert sse.status_code == 403
            assert sse.headers["content-type"].startswith("application/json")
        # Nor anything that is not its session's: the list, starting one, the server's routes.
        for method, path in [
            ("GET", "/sessions"),
            ("POST", "/sessions"),
            ("GET", "/"),
            ("GET", "/profiles"),
            ("GET", "/openapi.json"),
            ("GET", "/healthz"),
            ("GET", f"/media/{other}/a.png"),
        ]:
            response = await http.request(method, path, headers=write, json={"task": "x"})
            assert response.status_code == 403, (method, path, response.text)

        # Read-only cannot post, approve or cancel; the write token can, on its session only.
        for path, body in [
            (f"/sessions/{first}/messages", {"content": "also a cat"}),
            (f"/sessions/{first}/approvals/{call_id}", {"approved": True}),
            (f"/sessions/{first}/cancel", {}),
        ]:
            refused = await http.post(path, headers=read, json=body)
            assert refused.status_code == 403, (path, refused.text)
            assert "read-only" in refused.json()["detail"]
        their_call = await pending_call(http, other, theirs["read"])
        elsewhere = await http.post(
            f"/sessions/{other}/approvals/{their_call}", headers=write, json={"approved": True}
        )
        assert elsewhere.status_code == 403
        approved = await http.post(
            f"/sessions/{first}/approvals/{call_id}", headers=write, json={"approved": True}
        )
        assert approved.status_code == 200, approved.text
        async with client(server, headers=read) as reader:
            logged = await read_all(reader, first)
        assert logged[-1].json()["status"] == "completed"  # the approval was the one that counted

        # The admin token sees every session; the other one is still waiting for its approval.
        listed = (await http.get("/sessions", headers=ADMIN)).json()["sessions"]
        assert {first, other} <= {row["id"] for row in listed}
        waiting = (await http.get(f"/sessions/{other}/state", headers=ADMIN)).json()
        assert [call["call_id"] for call in waiting["pending_approvals"]] == [their_call]
        cancel = await http.post(f"/sessions/{other}/cancel", headers=bearer(theirs["write"]))
        assert cancel.status_code == 202


async def test_media_and_the_page_with_a_session_token(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,
        client(server) as http,
        client(server) as browser,
    ):
        session, tokens = await start(http, "paint a fox", profiles=["painter"])
        async with client(server, headers=bearer(tokens["read"])) as reader:
            events = await read_all(reader, session)
            assert events[-1].json()["status"] == "completed"
            state = (await reader.get(f"/sessions/{session}/state")).json()
            (image,) = state["agents"][0]["media_urls"]
            assert image.startswith(f"/media/{session}/")
            assert (await reader.get(image)).content.startswith(b"\x89PNG")

        # A link with the read token opens the live page, which trades it for the cookie; the
        # page's own requests then carry the cookie: assets, state, stream, media.
        page = await browser.get(f"/sessions/{session}?token={tokens['read']}")
        assert page.status_code == 303 and page.headers["location"] == f"/sessions/{session}"
        assert (await browser.get(f"/sessions/{session}")).status_code == 200
        assert (await browser.get("/assets/session.js")).status_code == 200
        assert (await browser.get(image)).status_code == 200
        assert (await browser.get(f"/sessions/{session}/state")).status_code == 200
        assert (await browser.get("/")).status_code == 403
        # A token given explicitly counts over the cookie: the admin token reaches the index.
        assert (await browser.get("/", headers=ADMIN)).status_code == 200


async def test_tokens_the_server_does_not_know_are_401_and_a_second_server_knows_them(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    (tmp_path / "second").mkdir()
    async with (
        make_bus() as bus,
        make_bus() as other_bus,  # another process on the same Redis (or memory bus)
        serving(bus, tmp_path, token=TOKEN) as server,
        serving(other_bus, tmp_path / "second", token=TOKEN) as second,
        client(server) as http,
        client(second) as http2,
    ):
        session, tokens = await start(http, "paint a fox", profiles=["painter"])
        secret = tokens["read"].split("~", 1)[1]
        for forged in (f"{session}~{secret[::-1]}", f"s-other~{secret}", secret, f"{session}~"):
            response = await http.get(f"/sessions/{session}/state", headers=bearer(forged))
            assert response.status_code == 401, forged
        # The digests are on the bus: a server that never saw the token honours it.
        state = await http2.get(f"/sessions/{session}/state", headers=bearer(tokens["read"]))
        assert state.status_code == 200 and state.json()["task"] == "paint a fox"
        posted = await http2.post(f"/sessions/{session}/cancel", headers=bearer(tokens["read"]))
        assert posted.status_code == 403


async def test_a_server_without_a_token_mints_none(make_bus: BusFactory, tmp_path: Path) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        response = await http.post("/sessions", json={"task": "paint a fox"})
        assert response.status_code == 201 and response.json()["tokens"] is None
        document = (await http.get("/openapi.json")).json()
        answers = document["paths"]["/sessions/{id}/events"]["get"]["responses"]
        assert {"401", "403"} <= set(answers)
        started = document["components"]["schemas"]["Started"]["properties"]
        assert "tokens" in started


class Unreachable(MemoryBus):
    """A bus that cannot say whose a token is: the server must not guess."""

    def __init__(self) -> None:
        super().__init__()
        before(self.store, "get", self._down)

    async def _down(self, session: str, table: str, key: str) -> None:
        raise BusUnreachable("memory://", "down for the test")


async def test_a_session_token_that_cannot_be_checked_is_503(tmp_path: Path) -> None:
    async with Unreachable() as bus, serving(bus, tmp_path, token=TOKEN) as server:
        async with client(server) as http:
            session, tokens = await start(http, "paint a fox", profiles=["painter"])
            response = await http.get(f"/sessions/{session}/state", headers=bearer(tokens["read"]))
            assert response.status_code == 503
            assert "cannot check the session token" in response.json()["detail"]
            assert (await http.get(f"/sessions/{session}/state", headers=ADMIN)).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "scope", "allowed"),
    [
        ("GET", "/sessions/s-a", "read", True),
        ("HEAD", "/sessions/s-a/state", "read", True),
        ("GET", "/sessions/s-a/events", "read", True),
        ("GET", "/media/s-a/painter/fox.png", "read", True),
        ("GET", "/assets/session.js", "read", True),
        ("GET", "/favicon.ico", "read", True),
        ("POST", "/sessions/s-a/approvals/c1", "write", True),
        ("POST", "/sessions/s-a/messages", "write", True),
        ("POST", "/sessions/s-a/cancel", "write", True),
        ("POST", "/sessions/s-a/cancel", "read", False),
        ("GET", "/sessions/s-a/", "read", False),
        ("GET", "/sessions/s-a/state/x", "write", False),
        ("POST", "/sessions/s-a/state", "write", False),
        ("POST", "/sessions/s-a/approvals/", "write", False),
        ("GET", "/sessions/s-b/events", "write", False),
        ("GET", "/media/s-a/../s-b/fox.png", "read", False),  # a raw path, not normalised
        ("GET", "/media/s-a/./fox.png", "read", False),
        ("GET", "/media/s-a//fox.png", "read", False),
        ("GET", "/media/s-a", "read", False),
        ("POST", "/media/s-a/fox.png", "write", False),
        ("GET", "/assets/x/y", "read", False),
        ("GET", "/sessions", "write", False),
        ("GET", "/", "write", False),
    ],
)
def test_what_a_grant_permits(method: str, path: str, scope: str, allowed: bool) -> None:
    assert scope in ("read", "write")
    grant = Grant("s-a", "read" if scope == "read" else "write")
    assert (grant.refusal(method, path) is None) is allowed


def test_the_session_a_token_names() -> None:
    assert session_of("s-a~secret") == "s-a"
    assert session_of("s-a.b_c~x~y") == "s-a.b_c"
    for malformed in ("secret", "~secret", "s-a~", "no:such~x", "..~x"):
        assert session_of(malformed) is None


@pytest.mark.parametrize("tokens_first", [True, False])
async def test_a_sessions_tokens_expire_with_it_on_redis(
    redis_server: RedisServer, tokens_first: bool
) -> None:
    """Whether the tokens are stored before the session's end is logged (the usual case) or
    after (a session that ended within the ``201``), they expire with the session's keys."""
    session = f"s-ended-{tokens_first}"
    async with RedisBus(redis_server.url, prefix=f"tokens-{tokens_first}") as bus:
        await bus.log.emit(SessionStarted(session=session, agent="lead", task="paint"))
        if tokens_first:
            await bus.store.put(session, "tokens", {digest("x"): "read"})
        await bus.retention.retire(session, 60.0)
        if not tokens_first:
            await bus.store.put(session, "tokens", {digest("x"): "read"})
        assert await bus.store.get(session, "tokens", digest("x")) == "read"
        async with Redis.from_url(redis_server.url, decode_responses=True) as observer:
            ttl_ms = int(await observer.pttl(bus.keys.table(session, "tokens")))
        assert 0 < ttl_ms <= 60_000

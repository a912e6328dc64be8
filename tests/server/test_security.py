"""The token on every route, the loopback rule, and CORS closed by default — over real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.bus.errors import ConfigError
from baton.bus.events import SessionStarted
from baton.server import ServerConfig, is_loopback
from tests.conftest import BusFactory
from tests.server.helpers import TOKEN, client, serving

ROUTES = [
    ("GET", "/"),
    ("GET", "/sessions"),
    ("POST", "/sessions"),
    ("GET", "/sessions/s-guarded"),
    ("GET", "/sessions/s-guarded/state"),
    ("GET", "/sessions/s-guarded/events"),
    ("POST", "/sessions/s-guarded/messages"),
    ("POST", "/sessions/s-guarded/approvals/c1"),
    ("POST", "/sessions/s-guarded/cancel"),
    ("GET", "/profiles"),
    ("GET", "/healthz"),
    ("GET", "/openapi.json"),
    ("GET", "/media/s-guarded/a.png"),
    ("GET", "/assets/session.js"),
    ("GET", "/no/such/route"),
]


def test_off_loopback_a_token_is_required() -> None:
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host)
        with pytest.raises(ConfigError, match="without a token"):
            ServerConfig(host=host)
    for host in ("127.0.0.1", "localhost", "::1", "127.8.9.10"):
        assert is_loopback(host)
        assert not ServerConfig(host=host).requires_token
    assert ServerConfig(host="0.0.0.0", token=TOKEN).requires_token
    with pytest.raises(ConfigError, match="too short"):
        ServerConfig(host="0.0.0.0", token="short")


async def test_a_non_loopback_server_answers_401_on_every_route_without_the_token(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, host="0.0.0.0", token=TOKEN) as server,
        client(server) as http,
    ):
        await bus.log.emit(SessionStarted(session="s-guarded", agent="lead", task="t"))
        for method, path in ROUTES:
            for headers in (
                {},
                {"Authorization": "Bearer wrong-token-0123456789"},
                {"Authorization": f"Basic {TOKEN}"},
                {"Cookie": "baton_token=nope"},
            ):
                response = await http.request(method, path, headers=headers, json={"task": "x"})
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"].startswith("Bearer")
            wrong_query = await http.request(method, f"{path}?token=nope", json={"task": "x"})
            assert wrong_query.status_code == 401

        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert (await http.get("/sessions", headers=bearer)).status_code == 200
        assert (await http.get("/healthz", headers=bearer)).status_code == 200
        started = await http.post("/sessions", headers=bearer, json={"task": "paint a fox"})
        assert started.status_code == 201
        # EventSource cannot send headers: the token as a query parameter works on the stream.
        async with http.stream("GET", f"/sessions/s-guarded/events?token={TOKEN}") as sse:
            assert sse.status_code == 200
            async for line in sse.aiter_lines():
                if line.startswith("event: "):
                    assert line == "event: session.started"
                    break


async def test_a_page_opened_with_the_token_trades_it_for_a_strict_cookie(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, token=TOKEN) as server,  # a token on loopback is enforced too
        client(server) as http,
    ):
        await bus.log.emit(SessionStarted(session="s-1", agent="lead", task="paint", model="m"))
        assert (await http.get("/sessions/s-1")).status_code == 401
        page = await http.get(f"/sessions/s-1?token={TOKEN}&x=1")
        assert page.status_code == 303 and page.headers["location"] == "/sessions/s-1?x=1"
        cookie = page.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        # The client kept the cookie: the page and the routes it calls now work without more.
        assert (await http.get("/sessions/s-1?x=1")).status_code == 200
        assert (await http.get("/profiles")).status_code == 200


async def test_cors_is_closed_by_default_and_opens_only_to_named_origins(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    evil = {"Origin": "https://evil.example"}
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        response = await http.get("/sessions", headers=evil)
        assert "access-control-allow-origin" not in response.headers
        preflight = await http.options(
            "/sessions", headers={**evil, "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in preflight.headers
    friend = "https://friend.example"
    async with (
        make_bus() as bus,
        serving(bus, tmp_path, cors_origins=(friend,)) as server,
        client(server) as http,
    ):
        response = await http.get("/sessions", headers={"Origin": friend})
        assert response.headers["access-control-allow-origin"] == friend
        response = await http.get("/sessions", headers=evil)
        assert "access-control-allow-origin" not in response.headers

"""Helpers of the server tests: a server on a free port, and a small SSE reader over httpx2."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from baton.bus.base import Bus
from baton.server import BatonServer, ServerConfig
from baton.subagents.profiles import Profile, load_profiles
from tests.support.profiles import ARTISTS

TOKEN = "t0ken-for-the-tests-0123456789"
PROFILES = ARTISTS


def profiles(tmp: Path) -> dict[str, Profile]:
    path = tmp / "profiles.toml"
    path.write_text(PROFILES)
    return load_profiles(path)


@asynccontextmanager
async def serving(bus: Bus, tmp: Path, **config: Any) -> AsyncIterator[BatonServer]:
    """A server on a free loopback port over ``bus``, media under ``tmp``."""
    settings = ServerConfig(port=0, bus_url=bus.url, media_dir=tmp / "media", **config)
    async with BatonServer(settings, bus=bus, profiles=profiles(tmp)) as server:
        yield server


def client(server: BatonServer, **kwargs: Any) -> httpx2.AsyncClient:
    url = server.url.replace("0.0.0.0", "127.0.0.1")
    return httpx2.AsyncClient(base_url=url, timeout=30.0, **kwargs)


@dataclass
class Sse:
    """One SSE event as a client sees it."""

    id: str | None = None
    event: str = "message"
    data: str = ""
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.data)
        return parsed


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[Sse]:
    """Parse an SSE body (per the WHATWG rules we rely on): events end at a blank line."""
    current = Sse()
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data or current.retry is not None or current.comments:
                current.data = "\n".join(data)
                yield current
            current, data = Sse(), []
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "":
            current.comments.append(value)
        elif name == "id":
            current.id = value
        elif name == "event":
            current.event = value
        elif name == "data":
            data.append(value)
        elif name == "retry":
            current.retry = int(value)


@asynccontextmanager
async def stream(
    http: httpx2.AsyncClient, session: str, headers: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[httpx2.Response, AsyncIterator[Sse]]]:
    async with http.stream("GET", f"/sessions/{session}/events", headers=headers) as response:
        yield response, sse_events(response.aiter_lines())


async def read_all(http: httpx2.AsyncClient, session: str, after: str | None = None) -> list[Sse]:
    """Every event of the stream (after ``after``) until the server ends it; no comments."""
    headers = {"Last-Event-ID": after} if after else None
    got: list[Sse] = []
    async with stream(http, session, headers) as (response, events):
        assert response.status_code == 200, await response.aread()
        async for event in events:
            if event.id is not None:
                got.append(event)
    return got


async def start_session(http: httpx2.AsyncClient, task: str, **body: Any) -> str:
    response = await http.post("/sessions", json={"task": task, **body})
    assert response.status_code == 201, response.text
    session: str = response.json()["id"]
    return session

"""The SSE stream over real HTTP, on both bus backends: complete, ordered, exactly resumable."""

from __future__ import annotations

from pathlib import Path

import anyio

from baton.bus.base import Bus
from baton.bus.events import SessionStarted
from tests.conftest import BusFactory
from tests.server.helpers import client, read_all, serving, start_session, stream


async def _log(bus: Bus, session: str) -> list[tuple[str, str]]:
    return [
        (logged.cursor, logged.event.type) async for logged in bus.log.tail(session, follow=False)
    ]


async def test_stream_to_the_end_then_resume_mid_stream_exactly(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "paint a fox and sketch a heron",
                                      profiles=["painter", "sketcher"])  # fmt: skip
        # Read the live stream only up to the first sub-agent's spawn, then drop the connection.
        first: list[tuple[str, str]] = []
        async with stream(http, session) as (response, events):
            assert response.headers["content-type"].startswith("text/event-stream")
            opening = await anext(events)
            assert opening.retry == 3000 and opening.id is None
            async for event in events:
                assert event.id is not None
                first.append((event.id, event.event))
                if event.event == "agent.spawned":
                    break
        # Resume where we left off: the rest, to the end of the session.
        rest = await read_all(http, session, after=first[-1][0])
        resumed = first + [(event.id or "", event.event) for event in rest]
        log = await _log(bus, session)
        assert resumed == log  # none twice, none missing, in order
        assert resumed[0][1] == "session.started" and resumed[-1][1] == "session.finished"
        for event in rest:  # id = cursor, event = type, data = the event's JSON
            data = event.json()
            assert data["type"] == event.event and data["session"] == session

        # A fresh reader gets the whole log; one resuming from any cursor gets exactly the tail.
        whole = await read_all(http, session)
        assert [(e.id, e.event) for e in whole] == log
        middle = len(log) // 2
        tail = await read_all(http, session, after=log[middle][0])
        assert [(e.id, e.event) for e in tail] == log[middle + 1 :]
        assert whole[-1].json()["status"] == "completed"

        # After the end, a reconnect is told to stop (204), as EventSource understands.
        done = await http.get(f"/sessions/{session}/events",
                              headers={"Last-Event-ID": log[-1][0]})  # fmt: skip
        assert done.status_code == 204


async def test_resume_by_query_parameter_and_bad_cursors(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "paint a fox", profiles=["painter"])
        whole = await read_all(http, session)
        cursor = whole[2].id
        async with http.stream("GET", f"/sessions/{session}/events?last_event_id={cursor}") as r:
            lines = [line async for line in r.aiter_lines() if line.startswith("id: ")]
        assert [line[4:] for line in lines] == [e.id for e in whole[3:]]
        bad = await http.get(f"/sessions/{session}/events", headers={"Last-Event-ID": "x; y"})
        assert bad.status_code == 400 and "bad event cursor" in bad.json()["detail"]
        missing = await http.get("/sessions/s-nothing-here/events")
        assert missing.status_code == 404


async def test_heartbeat_comment_keeps_an_idle_stream_alive(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path, heartbeat_s=0.2) as server:
        # A session that started elsewhere and is quiet now.
        await bus.log.emit(SessionStarted(session="s-quiet", agent="lead", task="wait"))
        async with client(server) as http, stream(http, "s-quiet") as (response, events):
            assert response.status_code == 200
            seen = []
            async for event in events:
                seen.append(event)
                if event.comments:
                    break
        assert [e.event for e in seen if e.id] == ["session.started"]
        assert seen[-1].comments[0].startswith("ping")


async def test_many_readers_of_one_session_share_one_feed(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    async with make_bus() as bus, serving(bus, tmp_path) as server, client(server) as http:
        session = await start_session(http, "paint a fox", profiles=["painter"])
        results: list[list[str]] = []

        async def reader() -> None:
            results.append([e.id or "" for e in await read_all(http, session)])

        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(reader)
        log = [cursor for cursor, _ in await _log(bus, session)]
        assert results == [log] * 8
        assert server.ctx is not None and len(server.ctx.feeds) == 0  # the last one out freed it

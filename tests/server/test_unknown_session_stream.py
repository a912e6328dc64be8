"""The event stream of a session that does not exist (never did, or expired, or was cleaned) is a
404 with no side effects, and ``baton serve`` goes on serving (issue 22).

One ``GET /sessions/nosuch/events`` used to wedge a server on Redis: its feed started following
the log, the 404 dropped it while it subscribed, and the bus's queue of subscriptions was left
stuck (``tests/bus/test_abandoned_watch.py`` shows that part on the bus). Every session the
server started afterwards stayed ``running`` at the lead's first wait while ``/healthz`` said ok.
Any ``EventSource`` reconnecting to a cleaned session sent exactly that request. Here: streams of
unknown and cleaned sessions (plain, resuming by header and by query, many at once), then
sessions that must all complete; what the 404s sent Redis (``INFO commandstats``: reads only);
and a ``/healthz`` that answers 503 while the bus cannot carry a session.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import anyio
from redis.asyncio import Redis

from baton.bus.base import BusOptions
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.server.helpers import client, read_all, serving, start_session

_prefixes = itertools.count()
READS = {"xrange", "info", "ping", "exists", "zrevrange"}


def redis_bus(server: RedisServer) -> RedisBus:
    return RedisBus(server.url, BusOptions(), prefix=f"nosuch{next(_prefixes)}")


async def command_calls(admin: Redis) -> dict[str, int]:
    stats = await admin.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


async def test_streams_of_unknown_and_cleaned_sessions_leave_the_server_serving(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    bus = redis_bus(redis_server)
    async with (
        bus,
        serving(bus, tmp_path) as server,
        client(server) as http,
        Redis.from_url(redis_server.url, decode_responses=True) as admin,
    ):
        with anyio.fail_after(60):
            cleaned = await start_session(http, "paint a fox", profiles=["painter"])
            last = (await read_all(http, cleaned))[-1]
        assert last.json()["status"] == "completed" and last.id is not None
        keys = [key async for key in admin.scan_iter(match=f"{bus.keys.prefix}:{{{cleaned}}}*")]
        assert await admin.delete(*keys)  # what expiry and `baton clean` leave: nothing

        before = await command_calls(admin)
        asks = [
            ("/sessions/nosuch/events", {}),
            (f"/sessions/{cleaned}/events", {}),
            (f"/sessions/{cleaned}/events", {"Last-Event-ID": last.id}),  # an EventSource back
            (f"/sessions/{cleaned}/events?last_event_id={last.id}", {}),
            ("/sessions/s-000000000000/events", {"Last-Event-ID": "1-0"}),
        ]
        statuses: list[int] = []

        async def ask(path: str, headers: dict[str, str]) -> None:
            statuses.append((await http.get(path, headers=headers)).status_code)

        with anyio.fail_after(30):
            for path, headers in asks:  # one at a time, then many at once
                await ask(path, headers)
            async with anyio.create_task_group() as group:
                for n in range(40):
                    group.start_soon(ask, *asks[n % len(asks)])
        assert statuses == [404] * (len(asks) + 40)
        after = await command_calls(admin)
        sent = {name for name, calls in after.items() if calls != before.get(name, 0)}
        assert sent <= READS, f"a 404 sent Redis {sorted(sent - READS)}"
        assert len(server.ctx.feeds) == 0 if server.ctx is not None else False

        with anyio.fail_after(60):  # the server still runs sessions, several at once
            finished: list[str] = []

            async def run(task: str) -> None:
                session = await start_session(http, task, profiles=["painter"])
                finished.append((await read_all(http, session))[-1].json()["status"])

            async with anyio.create_task_group() as group:
                for n in range(4):
                    group.start_soon(run, f"paint heron {n}")
        assert finished == ["completed"] * 4
        health = await http.get("/healthz")
        assert health.status_code == 200 and health.json() == {"ok": True}


async def test_healthz_answers_503_while_the_bus_takes_no_writes(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """PING still answers while Redis pauses writes (a failover, ``CLIENT PAUSE``), but no session
    can log or wake anyone: ``/healthz`` says so, with the reason, and recovers after."""
    bus = redis_bus(redis_server)
    async with (
        bus,
        serving(bus, tmp_path) as server,
        client(server) as http,
        Redis.from_url(redis_server.url, decode_responses=True) as admin,
    ):
        assert (await http.get("/healthz")).json() == {"ok": True}
        await admin.client_pause(20_000, all=False)  # writes only
        try:
            await bus.ping()  # what the old check asked: still answered
            paused = await http.get("/healthz")
        finally:
            await admin.client_unpause()
        assert paused.status_code == 503, paused.text
        body = paused.json()
        assert body["ok"] is False
        assert "no wake-up round trip within 2 s" in body["detail"], body
        with anyio.fail_after(10):
            assert (await http.get("/healthz")).json() == {"ok": True}


async def test_healthz_answers_503_once_the_server_stops(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    bus = redis_bus(redis_server)
    async with bus, serving(bus, tmp_path) as server, client(server) as http:
        assert server.ctx is not None
        await server.ctx.host.aclose()  # the first step of stopping
        answer = await http.get("/healthz")
        assert answer.status_code == 503
        assert "stopping" in answer.json()["detail"]
        refused = await http.post("/sessions", json={"task": "paint a fox"})
        assert refused.status_code == 503, refused.text

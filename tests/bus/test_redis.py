"""Redis-only behaviour: connection economy, a server restart, a lost pub/sub connection, the
documented ``redis-cli`` example, and how inbox streams are kept short."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from baton.bus.base import BusOptions, SpawnQueue
from baton.bus.errors import BusClosed, BusUnreachable, ConfigError
from baton.bus.events import SessionStarted
from baton.bus.messages import DEFAULT_POOL, Envelope, SpawnRequest, make_envelope
from baton.bus.redis import RedisBus
from baton.testing import RedisServer, free_port
from tests.support.polling import until
from tests.support.redis_cli import path_with_redis_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def task(session: str, to: str, content: str) -> Envelope:
    return make_envelope(session=session, sender="lead", recipient=to, type="task", content=content)


async def connections_named(url: str, name: str) -> int:
    async with Redis.from_url(url, decode_responses=True) as observer:
        clients = await observer.client_list()
    return sum(1 for c in clients if c.get("name") == name)


async def test_thousand_waiting_agents_share_three_connections(redis_server: RedisServer) -> None:
    agents = [f"a{i}" for i in range(1000)]
    all_waiting = anyio.Event()
    waiting = 0
    woken: dict[str, list[str]] = {}

    async with RedisBus(redis_server.url, BusOptions(), prefix="economy") as bus:

        async def agent(name: str) -> None:
            nonlocal waiting
            assert await bus.inboxes.read("s", name) == []
            waiting += 1
            if waiting == len(agents):
                all_waiting.set()
            assert await bus.inboxes.wait("s", name, timeout=60)
            woken[name] = [e.content for e in await bus.inboxes.read("s", name)]

        async with anyio.create_task_group() as tg:
            for name in agents:
                tg.start_soon(agent, name)
            with anyio.fail_after(60):
                await all_waiting.wait()
            held = await connections_named(redis_server.url, f"baton:{bus.consumer}")
            for name in agents:
                await bus.inboxes.send(task("s", name, f"hi {name}"))
    assert 1 <= held <= 3
    assert woken == {name: [f"hi {name}"] for name in agents}


async def test_agents_ride_out_a_redis_restart(redis_server: RedisServer) -> None:
    agents = [f"a{i}" for i in range(20)]
    received: dict[str, list[str]] = {name: [] for name in agents}
    got_before = anyio.Event()
    got_after = anyio.Event()

    async with RedisBus(redis_server.url, BusOptions(lease_s=1), prefix="restart") as bus:

        async def agent(name: str) -> None:
            while "after" not in received[name]:
                batch = await bus.inboxes.read("s", name)
                received[name] += [e.content for e in batch]
                await bus.inboxes.ack("s", name, [e.id for e in batch])
                if all(r == ["before"] for r in received.values()):
                    got_before.set()
                if batch:
                    continue
                await bus.inboxes.wait("s", name, timeout=30)
            if all("after" in r for r in received.values()):
                got_after.set()

        async with anyio.create_task_group() as tg:
            for name in agents:
                tg.start_soon(agent, name)
            for name in agents:
                await bus.inboxes.send(task("s", name, "before"))
            with anyio.fail_after(30):
                await got_before.wait()
            redis_server.kill()
            redis_server.start()  # same port, same AOF: what was acked stays acked
            for name in agents:
                await bus.inboxes.send(task("s", name, "after"))
            with anyio.fail_after(60):
                await got_after.wait()
    # every agent got the message sent after the restart, and nothing acked before it came back
    assert received == {name: ["before", "after"] for name in agents}


async def test_lost_pubsub_connection_wakes_waiters(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="pubsub-kill") as bus:
        assert await bus.inboxes.read("s", "a") == []
        async with Redis.from_url(redis_server.url) as admin:
            killed = await admin.client_kill_filter(_type="pubsub")
        assert killed >= 1
        await bus.inboxes.send(task("s", "a", "after the cut"))
        with anyio.fail_after(30):
            while not (got := await bus.inboxes.read("s", "a")):
                await bus.inboxes.wait("s", "a", timeout=30)
        assert [e.content for e in got] == ["after the cut"]


async def test_acked_entries_leave_the_stream_unacked_stay(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="trim") as bus:
        sent = [task("s", "a", str(i)) for i in range(10)]
        for envelope in sent:
            await bus.inboxes.send(envelope)
        got = await bus.inboxes.read("s", "a")
        await bus.inboxes.ack("s", "a", [e.id for e in got[:6]])
        async with Redis.from_url(redis_server.url, decode_responses=True) as admin:
            assert await admin.xlen("trim:{s}:inbox:a") == 4
            pending = await admin.xpending("trim:{s}:inbox:a", "agents")
            assert pending["pending"] == 4


def _doc_example() -> str:
    text = DOC.read_text()
    match = re.search(r"<!-- example: post-task -->\s*```sh\n(.*?)```", text, re.DOTALL)
    assert match, "docs/protocol.md lost its post-task example"
    return match.group(1)


async def test_protocol_doc_redis_cli_example_wakes_the_agent(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with RedisBus(redis_server.url) as bus:  # the default prefix, as in the doc
        assert await bus.inboxes.read("demo", "painter") == []
        path = path_with_redis_cli(tmp_path / "bin")
        env = {**os.environ, "REDIS_URL": redis_server.url, "PATH": path}
        result = await anyio.run_process(
            ["bash", "-euo", "pipefail", "-c", _doc_example()],
            env=env,
            check=False,
            stderr=subprocess.STDOUT,
        )
        assert result.returncode == 0, result.stdout.decode()
        with anyio.fail_after(10):
            assert await bus.inboxes.wait("demo", "painter", timeout=10)
        (got,) = await bus.inboxes.read("demo", "painter")
        assert got.content == "Draw a lighthouse at dusk"
        assert got.id == "01931f6e-8b4a-7cc0-9d1e-3f5a2b7c9d01"
        await bus.inboxes.ack("demo", "painter", [got.id])


async def test_malformed_spawn_request_goes_to_dead_letters(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="badspawn") as bus:
        async with Redis.from_url(redis_server.url) as admin:
            await admin.xadd("badspawn:spawn:{default}:p", {"req": '{"v":1,"session":"s"}'})
            await admin.xadd("badspawn:spawn:{default}:p", {"other": "x"})
        good = await bus.spawns.submit(SpawnRequest(session="s", agent="a", profile="p"))
        claim = await bus.claims.claim(SpawnQueue.of_pool(DEFAULT_POOL, ["p"]), timeout=5)
        assert claim is not None and claim.receipt == good  # the bad ones were set aside
        reasons = [letter.reason for letter in await bus.letters.recent()]
        assert any("invalid spawn request" in r for r in reasons)
        assert any("no 'req' field" in r for r in reasons)


async def none_left(count: Callable[[], Awaitable[int]]) -> bool:
    return await count() == 0


async def test_event_tails_unsubscribe_when_the_last_one_ends(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="tails") as bus:
        await bus.log.emit(SessionStarted(session="s", agent="lead", task="x"))
        channel = "tails:{s}:events"
        async with Redis.from_url(redis_server.url, decode_responses=True) as admin:

            async def subscribers() -> int:
                counts = await admin.pubsub_numsub(channel)
                return int(counts[0][1])

            first = bus.log.tail("s")
            second = bus.log.tail("s")
            assert isinstance(first, AsyncGenerator) and isinstance(second, AsyncGenerator)
            assert (await anext(first)).event.type == "session.started"
            assert (await anext(second)).event.type == "session.started"
            assert await subscribers() == 1  # one subscription serves both tails
            await first.aclose()
            assert await subscribers() == 1  # the second tail still needs it
            await second.aclose()
            # The UNSUBSCRIBE goes out from the wake-up connection's own task, and may land
            # after aclose() returns (its wait is brief).
            await until(lambda: none_left(subscribers), "the last tail's UNSUBSCRIBE", 5)


async def test_a_deleted_inbox_starts_again(redis_server: RedisServer) -> None:
    """A stream deleted under a reader (or a server back without its data) is recreated."""
    async with RedisBus(redis_server.url, prefix="nogroup") as bus:
        assert await bus.inboxes.read("s", "a") == []  # the group exists now
        async with Redis.from_url(redis_server.url) as admin:
            assert await admin.delete("nogroup:{s}:inbox:a") == 1
        await bus.inboxes.send(task("s", "a", "after the loss"))
        assert [e.content for e in await bus.inboxes.read("s", "a")] == ["after the loss"]


async def test_a_bus_that_failed_to_start_is_closed() -> None:
    bus = RedisBus(f"redis://127.0.0.1:{free_port()}/0", prefix="unreachable")
    with pytest.raises(BusUnreachable):
        async with bus:
            pytest.fail("the body must not run")  # pragma: no cover
    with pytest.raises(BusClosed, match="open a new one"):
        await bus.start()


async def test_a_bad_event_cursor_is_a_config_error_and_an_outage_is_not(
    redis_server: RedisServer,
) -> None:
    async with RedisBus(redis_server.url, prefix="cursor") as bus:
        await bus.log.emit(SessionStarted(session="s", agent="lead", task="x"))
        with pytest.raises(ConfigError, match="bad event cursor"):
            await anext(bus.log.tail("s", after="not-a-cursor", follow=False))
    async with RedisBus(redis_server.url, prefix="cursor") as bus:
        tail = bus.log.tail("s", follow=False)
        await bus.aclose()
        with pytest.raises(BusClosed):  # no longer reported as a bad cursor
            await anext(tail)

"""Spawn requests go where their route says, on both backends: a session's own queue to that
session's worker alone, a pool's to that pool's workers that know the profile (``docs/protocol.md``,
*Spawn requests and worker pools*)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from baton.bus.base import SpawnQueue
from baton.bus.messages import DEFAULT_POOL, LOCAL_POOL, Envelope, SpawnRequest
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.support.polling import until
from tests.support.redis_cli import path_with_redis_cli


def local(session: str, agent: str, profile: str = "painter") -> SpawnRequest:
    return SpawnRequest(session=session, agent=agent, profile=profile, pool=LOCAL_POOL)


def pooled(agent: str, profile: str = "painter", pool: str = DEFAULT_POOL) -> SpawnRequest:
    return SpawnRequest(session="s1", agent=agent, profile=profile, pool=pool)


def task(agent: str, content: str) -> Envelope:
    return Envelope(session="s1", sender="lead", recipient=agent, type="task", content=content)


async def test_a_sessions_own_requests_go_to_its_worker_alone(make_bus: BusFactory) -> None:
    async with make_bus(consumer="host") as bus:
        for agent in ("a1", "a2"):
            await bus.spawns.submit(local("s1", agent))
            await bus.spawns.submit(local("s2", agent))
        anyone = SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])
        assert await bus.claims.claim(anyone, timeout=0) is None  # no pool worker sees them

        for session in ("s1", "s2"):
            own = SpawnQueue.of_session(session)
            claims = [await bus.claims.claim(own, timeout=0) for _ in range(3)]
            assert claims[2] is None
            got = [(c.request.session, c.request.agent) for c in claims if c is not None]
            assert got == [(session, "a1"), (session, "a2")]


async def test_a_pool_worker_claims_only_its_pool(make_bus: BusFactory) -> None:
    async with make_bus(consumer="gpu") as gpu_bus, make_bus(consumer="cpu") as cpu_bus:
        await gpu_bus.spawns.submit(pooled("p1", pool="gpu"))
        await gpu_bus.spawns.submit(pooled("d1"))
        gpu = SpawnQueue.of_pool("gpu", ["painter", "writer"])
        cpu = SpawnQueue.of_pool(DEFAULT_POOL, ["painter", "writer"])

        on_gpu = await gpu_bus.claims.claim(gpu, timeout=5)
        assert on_gpu is not None and on_gpu.request.agent == "p1"
        assert await gpu_bus.claims.claim(gpu, timeout=0) is None  # d1 is not the gpu pool's
        on_cpu = await cpu_bus.claims.claim(cpu, timeout=5)
        assert on_cpu is not None and on_cpu.request.agent == "d1"
        assert await cpu_bus.claims.claim(cpu, timeout=0) is None


async def test_an_unknown_profile_stays_queued_for_a_worker_that_knows_it(
    make_bus: BusFactory,
) -> None:
    async with make_bus(consumer="painters") as painters, make_bus(consumer="writers") as writers:
        await painters.spawns.submit(pooled("w1", "writer"))
        await painters.spawns.submit(pooled("p1", "painter"))
        knows_painter = SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])
        mine = await painters.claims.claim(knows_painter, timeout=5)
        assert mine is not None and mine.request.agent == "p1"  # w1, queued first, was passed by
        assert await painters.claims.claim(knows_painter, timeout=0) is None

        theirs = await writers.claims.claim(SpawnQueue.of_pool(DEFAULT_POOL, ["writer"]), timeout=5)
        assert theirs is not None and theirs.request.agent == "w1"


async def test_claims_take_turns_over_the_profiles(make_bus: BusFactory) -> None:
    """A long queue of one profile does not starve another's."""
    async with make_bus() as bus:
        for n in range(6):
            await bus.spawns.submit(pooled(f"p{n}", "painter"))
        await bus.spawns.submit(pooled("w0", "writer"))
        both = SpawnQueue.of_pool(DEFAULT_POOL, ["painter", "writer"])
        first_two = [await bus.claims.claim(both, timeout=5) for _ in range(2)]
        assert sorted(c.request.agent for c in first_two if c is not None) == ["p0", "w0"]


async def test_receipts_of_several_streams_renew_ack_and_release_together(
    make_bus: BusFactory,
) -> None:
    async with make_bus(lease_s=60, consumer="w") as bus, make_bus(lease_s=60) as other:
        await bus.spawns.submit(pooled("p1", "painter"))
        await bus.spawns.submit(pooled("w1", "writer"))
        await bus.spawns.submit(local("s9", "l1"))
        both = SpawnQueue.of_pool(DEFAULT_POOL, ["painter", "writer"])
        claims = [await bus.claims.claim(both, timeout=5), await bus.claims.claim(both, timeout=5)]
        own = await bus.claims.claim(SpawnQueue.of_session("s9"), timeout=5)
        receipts = [c.receipt for c in (*claims, own) if c is not None]
        assert len(set(receipts)) == 3
        assert sorted(await bus.claims.renew(receipts)) == sorted(receipts)

        await bus.claims.release(receipts[:2])  # both pool streams, at once
        taken = [await other.claims.claim(both, timeout=5) for _ in range(2)]
        assert sorted(c.request.agent for c in taken if c is not None) == ["p1", "w1"]
        assert await bus.claims.renew(receipts) == [receipts[2]]  # the others are other's now
        await bus.claims.ack(receipts[2:])
        assert await other.claims.claim(SpawnQueue.of_session("s9"), timeout=0) is None


async def test_withdrawing_takes_back_only_what_no_worker_claimed(make_bus: BusFactory) -> None:
    """A session that ends withdraws its requests nobody claimed: never delivered afterwards,
    the agent's inbox gone with it; one a worker claimed stays that worker's."""
    async with make_bus(consumer="lead") as lead_bus, make_bus(consumer="w") as worker_bus:
        receipts: dict[str, str] = {}
        for agent in ("a1", "a2"):
            await lead_bus.inboxes.send(task(agent, f"paint for {agent}"))
            receipts[agent] = await lead_bus.spawns.submit(pooled(agent))
        queue = SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])
        claim = await worker_bus.claims.claim(queue, timeout=5)
        assert claim is not None and claim.receipt == receipts["a1"]

        assert await lead_bus.spawns.withdraw(list(receipts.values())) == [receipts["a2"]]
        assert await worker_bus.claims.claim(queue, timeout=0) is None  # a2: never delivered
        assert await worker_bus.inboxes.read("s1", "a2") == []  # its task went with it
        kept = await worker_bus.inboxes.read("s1", "a1")
        assert [e.content for e in kept] == ["paint for a1"]
        assert await worker_bus.claims.renew([claim.receipt]) == [claim.receipt]  # still a1's
        await worker_bus.claims.ack([claim.receipt])
        assert await lead_bus.spawns.withdraw(list(receipts.values())) == []  # nothing left


async def test_a_sessions_own_queue_is_dropped_with_what_is_left(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        for agent in ("a1", "a2"):
            await bus.spawns.submit(local("s1", agent))
        await bus.spawns.submit(local("s2", "b1"))
        own = SpawnQueue.of_session("s1")
        claim = await bus.claims.claim(own, timeout=5)
        assert claim is not None
        await bus.claims.release([claim.receipt])  # given back unfinished as the session ended

        assert await bus.spawns.drop_queue("s1") == 2
        assert await bus.claims.claim(own, timeout=0) is None
        assert await bus.spawns.drop_queue("s1") == 0
        other = await bus.claims.claim(SpawnQueue.of_session("s2"), timeout=0)
        assert other is not None and other.request.agent == "b1"  # another session's: kept


def test_a_pool_cannot_be_named_local() -> None:
    with pytest.raises(ValueError, match="reserved"):
        SpawnQueue.of_pool(LOCAL_POOL, ["painter"])
    with pytest.raises(ValueError, match="not valid"):
        SpawnQueue.of_pool("gpu:1", ["painter"])


# -- Redis only: what a foreign producer can put in a stream, and the wake-up subscriptions -----


async def test_a_request_in_the_wrong_stream_is_dead_lettered(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="misroute") as bus:
        own = bus.keys.spawn_local("s1")
        async with Redis.from_url(redis_server.url) as admin:
            # Another session's request, and a writer in the painters' stream: never run.
            await admin.xadd(own, {"req": local("s2", "intruder").model_dump_json()})
            painters = bus.keys.spawn_pool(DEFAULT_POOL, "painter")
            await admin.xadd(painters, {"req": pooled("w1", "writer").model_dump_json()})
        await bus.spawns.submit(local("s1", "a1"))
        claim = await bus.claims.claim(SpawnQueue.of_session("s1"), timeout=5)
        assert claim is not None and claim.request.agent == "a1"
        assert await bus.claims.claim(SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])) is None

        letters = await bus.letters.recent()
        assert sorted(letter.source for letter in letters) == sorted([own, painters])
        assert all(letter.reason.startswith("misrouted spawn request") for letter in letters)
        async with Redis.from_url(redis_server.url) as admin:
            assert await admin.xlen(painters) == 0 and await admin.xlen(own) == 1  # a1's


async def test_a_profile_stream_of_the_wrong_type_does_not_stop_the_others(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """``SET baton:spawn:{P}:writer x`` used to make every claim of pool P fail (WRONGTYPE
    aborted the whole claim script) and its workers log "claim refused" every second for ever.
    Now that stream is skipped, reported once, and read again once it is a stream."""
    caplog.set_level(logging.INFO, logger="baton.bus.redis.claims")
    queue = SpawnQueue.of_pool(DEFAULT_POOL, ["painter", "writer"])
    async with RedisBus(redis_server.url, prefix="wrongtype") as bus:
        writers = bus.keys.spawn_pool(DEFAULT_POOL, "writer")
        async with Redis.from_url(redis_server.url) as admin:
            await admin.set(writers, "x")
            claims = []
            for n in range(3):  # each claim starts at another stream: the broken one too
                await bus.spawns.submit(pooled(f"p{n}", "painter"))
                claims.append(await bus.claims.claim(queue, timeout=5))
            assert [c.request.agent for c in claims if c is not None] == ["p0", "p1", "p2"]
            assert await bus.claims.claim(queue, timeout=0) is None  # nothing else, no error
            reports = [r for r in caplog.records if writers in r.getMessage()]
            assert len(reports) == 1 and "WRONGTYPE" in reports[0].getMessage(), reports

            await admin.delete(writers)  # mended: its requests are served again
            await bus.spawns.submit(pooled("w1", "writer"))
            claim = await bus.claims.claim(queue, timeout=5)
            assert claim is not None and claim.request.agent == "w1"
            assert any("can be read again" in r.getMessage() for r in caplog.records)


async def test_a_sessions_worker_leaving_unsubscribes(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="leave") as bus:
        own = SpawnQueue.of_session("s1")
        pool = SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])
        assert await bus.claims.claim(own, timeout=0) is None
        assert await bus.claims.claim(pool, timeout=0) is None
        channels = [bus.keys.spawn_local("s1"), bus.keys.spawn_wake(DEFAULT_POOL)]
        async with Redis.from_url(redis_server.url, decode_responses=True) as admin:
            assert [n for _, n in await admin.pubsub_numsub(*channels)] == [1, 1]
            await bus.claims.leave(own)
            await bus.claims.leave(pool)  # a pool's channel stays: other workers may share it

            async def counts() -> list[int]:
                return [int(n) for _, n in await admin.pubsub_numsub(*channels)]

            async def own_left() -> bool:  # leave() waits until UNSUBSCRIBE is sent, not served
                return (await counts())[0] == 0

            await until(own_left, "Redis to drop the session's spawn channel")
            assert await counts() == [0, 1]


def _doc_example() -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    match = re.search(r"<!-- example: spawn-gpu -->\s*```sh\n(.*?)```", text, re.DOTALL)
    assert match, "docs/protocol.md lost its spawn-gpu example"
    return match.group(1)


async def test_protocol_doc_spawn_example_reaches_a_gpu_worker(tmp_path: Path) -> None:
    example = _doc_example()
    path = path_with_redis_cli(tmp_path / "bin")
    with RedisServer() as server:
        async with RedisBus(server.url) as bus:  # the default prefix, as in the doc
            gpu = SpawnQueue.of_pool("gpu", ["painter"])
            assert await bus.claims.claim(gpu, timeout=0) is None  # subscribed, groups made
            done = await anyio.run_process(
                ["bash", "-euo", "pipefail", "-c", example],
                env={**os.environ, "REDIS_URL": server.url, "PATH": path},
                check=False,
                stderr=subprocess.STDOUT,
            )
            assert done.returncode == 0, done.stdout.decode()
            claim = await bus.claims.claim(gpu, timeout=10)
            assert claim is not None
            assert (claim.request.session, claim.request.agent) == ("demo", "painter")

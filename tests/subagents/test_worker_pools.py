"""Who hosts a sub-agent: a session's own worker hosts its sub-agents and no other session's, a
``baton worker --pool NAME`` only its pool's, and a worker leaves a request for a profile it does
not know to one that knows it (``docs/protocol.md``, *Spawn requests and worker pools*)."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import pytest
from redis.asyncio import Redis

from baton.bus.base import SpawnQueue
from baton.bus.events import AgentClaimed, AgentExited, AgentSpawned, SessionFinished
from baton.bus.messages import DEFAULT_POOL, LOCAL_POOL, SpawnRequest
from baton.bus.redis import RedisBus
from baton.llm.offline import offline_reply
from baton.session import SessionResult, open_session
from baton.subagents.loop import AgentParts
from baton.subagents.worker import Worker
from baton.testing import RedisServer
from tests.cli.helpers import clean_env, invoke_baton
from tests.conftest import BusFactory
from tests.lead.helpers import PAINT_AND_WRITE
from tests.subagents.helpers import SESSION, Lead, profile, task
from tests.subagents.test_processes import WorkerProcess, cluster
from tests.support.events import logged_events, wait_for_event
from tests.support.models import scripted

PROFILES = {
    "painter": profile("generate_image", name="painter"),
    "writer": profile("summarise", name="writer"),
}


async def test_sessions_sharing_a_bus_host_only_their_own_sub_agents(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """As on ``baton serve``: one bus, many sessions at once, each with its own worker. Before
    routing, nearly every sub-agent ran on another session's worker."""
    sessions = [f"s-own-{n}" for n in range(4)]
    results: dict[str, SessionResult] = {}
    async with RedisBus(redis_server.url, prefix="ownhosts") as bus:

        async def run(session_id: str) -> None:
            session = open_session(
                PAINT_AND_WRITE,
                bus=bus,
                session_id=session_id,
                bus_url=redis_server.url,
                media_dir=tmp_path,
                timeout_s=60,
            )
            async with session:
                results[session_id] = await session.run()

        async with anyio.create_task_group() as group:
            for session_id in sessions:
                group.start_soon(run, session_id)

        for session_id in sessions:
            assert results[session_id].status == "completed"
            log = await logged_events(bus, session_id)
            hosts = {e.agent: e.worker for e in log if isinstance(e, AgentClaimed)}
            assert set(hosts) == {"painter", "writer"}
            assert set(hosts.values()) == {f"{session_id}-local"}, hosts
            for agent in hosts:
                owner = (await bus.records.agent(session_id, agent))["owner"]
                assert owner.startswith(f"{session_id}-local/")
            # its own spawn queue ended with it (an empty stream and its group used to stay)
            assert not await bus._core.one("EXISTS", bus.keys.spawn_local(session_id))


async def test_a_worker_leaves_a_profile_it_does_not_know_to_one_that_does(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    _, model = scripted()
    async with make_bus() as painter_bus, make_bus() as writer_bus, make_bus() as lead_bus, model:
        lead = Lead(lead_bus)
        painters = {"painter": PROFILES["painter"]}
        async with Worker(
            painter_bus, painters, lambda p: model, parts=AgentParts(media_dir=tmp_path)
        ) as paints:
            for agent, profile_name in (("w1", "writer"), ("p1", "painter")):  # w1 first
                await lead_bus.inboxes.send(task(agent, f"{profile_name}: the sea"))
                spawn = SpawnRequest(session=SESSION, agent=agent, profile=profile_name)
                await lead_bus.spawns.submit(spawn)
            (painted,) = await lead.until_results(1)
            # The painter worker claimed after w1 was queued, and left it: no error answered it.
            assert painted.sender == "p1" and paints.claimed == 1
            assert lead.results_from("w1") == []

            writers = {"writer": PROFILES["writer"]}
            async with Worker(
                writer_bus, writers, lambda p: model, parts=AgentParts(media_dir=tmp_path)
            ) as writes:
                await lead.until_results(2)
            assert writes.claimed == 1 and paints.claimed == 1
        (written,) = lead.results_from("w1")
        assert written.meta["reason"] == "finished"
        log = await logged_events(lead_bus, SESSION)
        hosts = {e.agent: e.worker for e in log if isinstance(e, AgentClaimed)}
        assert hosts == {"p1": paints.name, "w1": writes.name}


async def test_with_no_worker_for_its_pool_the_session_times_out_and_withdraws(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """Nobody answers a request no worker can take: the lead learns it from its timeout. As the
    session ends it withdraws them: a worker of the pool that turns up later used to start the
    agents after ``session.finished`` (their events logged after it, their results in an inbox
    nobody reads)."""
    async with make_bus() as bus:
        session = open_session(
            PAINT_AND_WRITE,
            bus=bus,
            local_workers=False,
            pool="nobody",
            timeout_s=1.5,
            media_dir=tmp_path,
        )
        async with session:
            result = await session.run()
        assert result.status == "timed_out"
        waiting = SpawnQueue.of_pool("nobody", ["painter", "writer"])
        assert await bus.claims.claim(waiting, timeout=0) is None  # withdrawn, never started
        log = await logged_events(bus, session.id)
        assert isinstance(log[-1], SessionFinished)
        started = {e.agent for e in log if isinstance(e, AgentSpawned)}
        exits = {e.agent: e.reason for e in log if isinstance(e, AgentExited)}
        assert started == {"painter", "writer"} and exits == dict.fromkeys(started, "shutdown")
        for agent in started:  # their tasks went with them
            assert await bus.inboxes.read(session.id, agent) == []


@pytest.mark.process
async def test_a_worker_process_with_pool_gpu_takes_only_gpu_requests(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with cluster(redis_server, tmp_path, offline_reply) as c:
        gpu = WorkerProcess([*c.args, "--pool", "gpu"], c.env)
        c.workers.append(gpu)
        await gpu.ready()
        assert " pool=gpu " in gpu.log[-1]
        keys = RedisBus(redis_server.url, prefix=c.args[c.args.index("--prefix") + 1]).keys
        elsewhere = [
            SpawnRequest(session=SESSION, agent="d1", profile="crash"),
            SpawnRequest(session=SESSION, agent="l1", profile="crash", pool=LOCAL_POOL),
        ]
        for request in elsewhere:
            await c.bus.inboxes.send(task(request.agent, "paint elsewhere"))
            await c.bus.spawns.submit(request)
        await c.bus.inboxes.send(task("g1", "paint on the gpu"))
        await c.bus.spawns.submit(
            SpawnRequest(session=SESSION, agent="g1", profile="crash", pool="gpu")
        )

        (result,) = await Lead(c.bus).until_results(1, timeout=60)
        assert result.sender == "g1"
        claimed = await wait_for_event(c.bus, SESSION, AgentClaimed, timeout=10)
        assert claimed.worker == gpu.name
        async with Redis.from_url(redis_server.url, decode_responses=True) as admin:
            for request in elsewhere:  # queued, and never so much as read by the gpu worker
                stream = keys.spawn_stream(request)
                assert await admin.xlen(stream) == 1
                assert await admin.xinfo_groups(stream) == []
        gpu.proc.send_signal(signal.SIGTERM)
        assert await gpu.exit_code() == 0


def test_worker_refuses_the_reserved_pool_name(tmp_path: Path) -> None:
    code, _, err = invoke_baton("worker", "--pool", "local", "--check", env=clean_env(tmp_path))
    assert code == 2
    assert "reserved" in err and "Traceback" not in err


async def test_default_pool_is_where_workers_and_sessions_meet(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        worker = Worker(bus, PROFILES)
        assert worker.queue == SpawnQueue.of_pool(DEFAULT_POOL, ["painter", "writer"])
        own = Worker(bus, PROFILES, session="s-x")
        assert own.queue == SpawnQueue.of_session("s-x")

"""The embeddable worker: hosting under a concurrency limit, refusals, drain and hand-over, and
riding out a Redis restart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from baton.bus.base import Bus
from baton.bus.errors import ConfigError
from baton.bus.events import RoundEnded
from baton.bus.memory import MemoryBus
from baton.bus.messages import LOCAL_POOL, Envelope, SpawnRequest, refusal_id
from baton.bus.redis import RedisBus
from baton.bus.redis.keys import Keys
from baton.engine import ToolRegistry
from baton.engine.spend import BusSpend
from baton.llm.offline import offline_reply
from baton.llm.script import Json, Reply, ScriptItem
from baton.llm.types import ChatModel
from baton.subagents.loop import AgentParts, SubAgent
from baton.subagents.profiles import Profile
from baton.subagents.worker import Worker, WorkerLimits
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.subagents.helpers import SESSION, Lead, profile, task
from tests.support.events import wait_for_event
from tests.support.models import call, scripted

PROFILES = {
    "painter": profile("generate_image", name="painter"),
    "writer": profile("summarise", name="writer", idle_timeout_s=30),
}


def spawn(agent: str, profile_name: str = "painter") -> SpawnRequest:
    return SpawnRequest(session=SESSION, agent=agent, profile=profile_name)


def test_a_worker_refuses_parts_that_are_each_agents_own() -> None:
    """Tools and a remote runner come from each agent's profile; a pool's agents each spend
    their own session's budget: a worker given one for all of them would mix sessions."""
    bus = MemoryBus()
    with pytest.raises(ValueError, match="from profiles"):
        Worker(bus, parts=AgentParts(tools=ToolRegistry([])))
    with pytest.raises(ValueError, match="spends its own"):
        Worker(bus, parts=AgentParts(spend=BusSpend(bus, SESSION)))
    Worker(bus, session=SESSION, parts=AgentParts(spend=BusSpend(bus, SESSION)))  # its own
    with pytest.raises(ValueError, match="at least 1"):
        WorkerLimits(concurrency=0)


async def test_hosts_many_agents_under_the_concurrency_limit(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    _, model = scripted()
    most = 0
    live: set[str] = set()

    def on_round(agent: SubAgent, batch: Sequence[Envelope]) -> None:
        nonlocal most
        live.add(agent.name)
        most = max(most, worker.hosted)

    async with make_bus() as bus, make_bus() as lead_bus, model:
        worker = Worker(
            bus,
            PROFILES,
            lambda p: model,
            parts=AgentParts(media_dir=tmp_path, on_round=on_round),
            limits=WorkerLimits(concurrency=2),
        )
        async with worker:
            for n in range(6):
                await lead_bus.inboxes.send(task(f"p{n}", f"paint number {n}"))
                await lead_bus.spawns.submit(spawn(f"p{n}"))
            results = await Lead(lead_bus).until_results(6)
        assert sorted(r.sender for r in results) == [f"p{n}" for n in range(6)]
        assert all(len(r.media_urls) == 1 for r in results)
        assert most <= 2 and len(live) == 6
        assert worker.finished == 6 and worker.hosted == 0
        assert await lead_bus.claims.claim(worker.queue) is None  # every request was acked


async def test_unknown_profile_gets_one_error_result(make_bus: BusFactory, tmp_path: Path) -> None:
    """In a session's own queue, whose one reader is the session's worker; a pool worker leaves
    it queued instead (tests/subagents/test_worker_pools.py)."""
    _, model = scripted()
    async with make_bus() as bus, make_bus() as lead_bus, model:
        async with Worker(
            bus, PROFILES, lambda p: model, session=SESSION, parts=AgentParts(media_dir=tmp_path)
        ):
            juggler = SpawnRequest(session=SESSION, agent="x1", profile="juggler", pool=LOCAL_POOL)
            await lead_bus.spawns.submit(juggler)
            (result,) = await Lead(lead_bus).until_results(1)
        assert result.sender == "x1" and result.meta["reason"] == "error"
        assert "unknown profile 'juggler'" in result.content and "painter" in result.content


async def spawn_entries(bus: Bus, request: SpawnRequest) -> int:
    """Requests still in the request's spawn stream (an acked one leaves it at once)."""
    if isinstance(bus, RedisBus):
        return int(await bus._core.one("XLEN", bus.keys.spawn_stream(request)))
    assert isinstance(bus, MemoryBus)
    stream = bus._broker.spawn.get(Keys().spawn_stream(request))
    return 0 if stream is None else len(stream.entries)


def held(bus: Bus) -> set[str]:
    """The receipts a Redis bus still counts as handed out to its worker."""
    if not isinstance(bus, RedisBus):
        return set()
    return set().union(*(lease.held for lease in bus.claims._by_key.values()))


async def test_an_agent_that_cannot_be_set_up_gets_one_error_result(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    """A failure before the agent runs (here its model: a profile's endpoint settings) used to
    leave the request pending, claimed again every lease with a traceback, and the lead waited
    to its timeout. Now the lead gets an error result at once and the request is acked."""
    _, model = scripted()

    def models(p: Profile) -> ChatModel:
        if p.name == "painter":
            raise ConfigError("profile painter: api_key_env PAINTER_KEY is not set")
        return model

    async with make_bus(lease_s=1) as bus, make_bus(lease_s=1) as lead_bus, model:
        request = spawn("p1")
        async with Worker(bus, PROFILES, models, parts=AgentParts(media_dir=tmp_path)) as worker:
            await lead_bus.inboxes.send(task("p1", "paint a heron"))
            await lead_bus.spawns.submit(request)
            (result,) = await Lead(lead_bus).until_results(1, timeout=5)
        assert result.sender == "p1" and result.meta["reason"] == "error"
        assert "PAINTER_KEY is not set" in result.content, result.content
        assert await spawn_entries(lead_bus, request) == 0  # acked: never claimed again
        assert held(bus) == set()
        assert worker.claimed == 1 and worker.finished == 0


async def test_a_refusal_fits_whatever_the_request_id(make_bus: BusFactory, tmp_path: Path) -> None:
    """``refused-<request id>`` is over the envelope's 100 characters for a long request id:
    building it used to fail on every claim, for ever."""
    _, model = scripted()
    long_id = "r" * 100
    async with make_bus(lease_s=1) as bus, make_bus(lease_s=1) as lead_bus, model:
        async with Worker(
            bus, PROFILES, lambda p: model, session=SESSION, parts=AgentParts(media_dir=tmp_path)
        ):
            juggler = SpawnRequest(id=long_id, session=SESSION, agent="x1", profile="juggler",
                                   pool=LOCAL_POOL)  # fmt: skip
            await lead_bus.spawns.submit(juggler)
            (result,) = await Lead(lead_bus).until_results(1, timeout=5)
        assert result.meta["reason"] == "error" and len(result.id) <= 100
        assert result.id == refusal_id(long_id)  # the same on every claim: deduped
        assert await spawn_entries(lead_bus, juggler) == 0
        assert held(bus) == set()
    assert refusal_id("abc") == "refused-abc"


def partial_first(body: Json) -> ScriptItem:
    """Round 1 ("draft ...") summarises and stops without a result; later rounds finish."""
    messages = body["messages"]
    last_user = [m for m in messages if m["role"] == "user"][-1]["content"]
    if "draft" in last_user and messages[-1]["role"] == "user":
        return call("summarise", "c1", text=last_user)
    if "draft" in last_user:
        return Reply(text="Drafted; waiting for the go-ahead.")
    return offline_reply(body)


async def test_drain_gives_agents_back_and_another_worker_resumes(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    server, model = scripted(fallback=False)
    server.script.responder = partial_first
    async with make_bus(lease_s=2) as bus_a, make_bus(lease_s=2) as bus_b, model:
        async with make_bus(lease_s=2) as lead_bus:
            lead = Lead(lead_bus)
            worker_a = Worker(
                bus_a, PROFILES, lambda p: model, parts=AgentParts(media_dir=tmp_path)
            )
            async with worker_a:
                await lead_bus.inboxes.send(task("w1", "draft a poem"))
                await lead_bus.spawns.submit(spawn("w1", "writer"))
                # Shut down as the draft round ends: the drain lets it checkpoint and ack.
                await wait_for_event(lead_bus, SESSION, lambda e: isinstance(e, RoundEnded)
                                     and e.agent == "w1" and e.round == 2)  # fmt: skip
                worker_a.drain()
            assert worker_a.finished == 0 and lead.results == []
            async with Worker(
                bus_b, PROFILES, lambda p: model, parts=AgentParts(media_dir=tmp_path)
            ) as worker_b:
                await lead_bus.inboxes.send(task("w1", "go ahead and finish"))
                (result,) = await lead.until_results(1)
            assert worker_b.finished == 1 and result.sender == "w1"
            assert "go ahead and finish" in result.content
            # The resumed agent kept its memory: the draft round is in the last request.
            contents = [m.get("content") for m in server.requests[-1].messages]
            assert "[task from lead] draft a poem" in contents


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_rides_out_a_redis_restart(
    make_bus: BusFactory, redis_server: RedisServer, tmp_path: Path
) -> None:
    in_call = anyio.Event()

    def slow_model(body: Json) -> ScriptItem:
        reply = offline_reply(body)
        if not in_call.is_set():
            in_call.set()
            return Reply(text=reply.text, calls=reply.calls, delay=0.1)
        return reply

    server, model = scripted(fallback=False)
    server.script.responder = slow_model
    async with make_bus(lease_s=5) as bus, make_bus(lease_s=5) as lead_bus, model:
        async with Worker(
            bus,
            PROFILES,
            lambda p: model,
            parts=AgentParts(media_dir=tmp_path),
            limits=WorkerLimits(concurrency=10),
        ):
            for n in range(4):
                await lead_bus.inboxes.send(task(f"r{n}", f"paint river {n}"))
                await lead_bus.spawns.submit(spawn(f"r{n}"))
            await in_call.wait()
            redis_server.restart()
            results = await Lead(lead_bus).until_results(4, timeout=40)
        assert sorted(r.sender for r in results) == [f"r{n}" for n in range(4)]
        assert len({r.id for r in results}) == 4
        assert all(len(r.media_urls) == 1 for r in results)

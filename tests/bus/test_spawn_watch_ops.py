"""What a session's spawn watch reads on the bus, on both backends: where each of its requests
stands (``spawn_states``), which workers serve a pool (``announce_worker``, ``pool_workers``,
lapsing by the server's clock), and every request it submits (``watch_spawns``), stamped with
the id of its signing key (its ``key_id``)."""

from __future__ import annotations

from pathlib import Path

import anyio
from pydantic import SecretStr

from baton.bus.base import SpawnQueue
from baton.bus.messages import SpawnRequest
from baton.bus.signing import key_id
from baton.subagents.loop import AgentParts
from baton.subagents.worker import Worker
from tests.conftest import BusFactory
from tests.subagents.helpers import profile

S = "s-watch"


def request(agent: str, pool: str = "gpu", profile_name: str = "painter") -> SpawnRequest:
    return SpawnRequest(session=S, agent=agent, profile=profile_name, pool=pool)


async def test_a_requests_state_follows_it_from_queued_to_claimed_to_gone(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus, make_bus() as worker:
        first = await bus.spawns.submit(request("a1"))
        second = await bus.spawns.submit(request("a2"))
        assert await bus.spawns.states([first, second]) == {first: "queued", second: "queued"}
        queue = SpawnQueue.of_pool("gpu", ["painter"])
        claim = await worker.claims.claim(queue)
        assert claim is not None
        claimed, waiting = (first, second) if claim.request.agent == "a1" else (second, first)
        assert await bus.spawns.states([first, second]) == {claimed: "claimed", waiting: "queued"}
        await worker.claims.ack([claim.receipt])
        assert await bus.spawns.withdraw([waiting]) == [waiting]
        assert await bus.spawns.states([first, second]) == {first: "gone", second: "gone"}


async def test_workers_announce_the_pool_they_serve_until_they_stop_or_it_lapses(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        assert await bus.workers.live("gpu") == {}
        await bus.workers.announce("gpu", "w1", ["painter", "writer"], ttl_s=60)
        await bus.workers.announce("gpu", "w2", ["writer"], ttl_s=0.3)
        await bus.workers.announce("cpu", "w3", ["painter"], ttl_s=60)
        assert await bus.workers.live("gpu") == {
            "w1": frozenset({"painter", "writer"}),
            "w2": frozenset({"writer"}),
        }
        with anyio.fail_after(5):  # w2 stopped renewing: it lapses by the server's clock
            while True:
                if "w2" not in await bus.workers.live("gpu"):
                    break
                await anyio.sleep(0.05)
        await bus.workers.announce("gpu", "w1", ["painter", "writer"], ttl_s=0)  # it stopped
        assert await bus.workers.live("gpu") == {}
        assert set(await bus.workers.live("cpu")) == {"w3"}


async def test_a_pool_worker_announces_itself_while_it_runs(
    make_bus: BusFactory, tmp_path: Path
) -> None:
    profiles = {"painter": profile("generate_image", name="painter")}
    async with make_bus() as bus, make_bus() as worker_bus:
        async with Worker(
            worker_bus, profiles, pool="gpu", parts=AgentParts(media_dir=tmp_path)
        ) as worker:
            assert await bus.workers.live("gpu") == {worker.name: frozenset({"painter"})}
        assert await bus.workers.live("gpu") == {}  # a stopped worker serves nothing


async def test_every_request_submitted_carries_the_key_id_and_reaches_the_watcher(
    make_bus: BusFactory,
) -> None:
    key = SecretStr("a deployment's key")
    seen: list[tuple[str, str | None, str]] = []
    async with make_bus(signing_key=key) as signing, make_bus() as plain:
        stop = signing.spawns.watch(S, lambda req, receipt: seen.append((req.agent, req.key_id,
                                                                          receipt)))  # fmt: skip
        receipt = await signing.spawns.submit(request("a1"))
        await signing.spawns.submit(SpawnRequest(session="s-other", agent="b", profile="painter"))
        stop()
        await signing.spawns.submit(request("a2"))  # no longer watched
        await plain.spawns.submit(request("a3"))
        assert seen == [("a1", key_id(key), receipt)]
        queue = SpawnQueue.of_pool("gpu", ["painter"])
        ids = {}
        while (claim := await plain.claims.claim(queue)) is not None:
            ids[claim.request.agent] = claim.request.key_id
        assert ids == {"a1": key_id(key), "a2": key_id(key), "a3": ""}

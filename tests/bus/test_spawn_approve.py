"""A spawn request carries the session's approval policy (``meta.approve``) to whichever worker
claims it (docs/protocol.md, *Approvals*): it survives the trip on both backends, a request
without it means ``ask``, and one whose policy is no policy is dead-lettered, never guessed."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from baton.bus.base import SpawnQueue
from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import APPROVE_KEY, LOCAL_POOL, SpawnRequest, parse_spawn_request
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.conftest import BusFactory


def request(agent: str, **meta: object) -> SpawnRequest:
    return SpawnRequest.model_validate(
        {"session": "s1", "agent": agent, "profile": "publisher", "pool": LOCAL_POOL, "meta": meta}
    )


@pytest.mark.parametrize("policy", ["ask", "auto", "deny"])
async def test_the_policy_reaches_the_claiming_worker(make_bus: BusFactory, policy: str) -> None:
    async with make_bus(consumer="host") as bus:
        await bus.submit_spawn(request("p1", **{APPROVE_KEY: policy}))
        claim = await bus.claim_spawn(SpawnQueue.of_session("s1"), timeout=5)
        assert claim is not None and claim.request.approve == policy


def test_a_request_without_a_policy_asks_and_a_bad_one_is_refused() -> None:
    assert request("p1").approve == "ask"
    for bad in ("yes", True, ["auto"]):
        raw = json.dumps({"v": 1, "session": "s1", "agent": "p1", "profile": "publisher",
                          "meta": {"approve": bad}})  # fmt: skip
        with pytest.raises(InvalidEnvelope, match=r"meta\.approve must be 'ask', 'auto' or 'deny'"):
            parse_spawn_request(raw)


async def test_a_request_with_a_bad_policy_is_dead_lettered(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="badpolicy") as bus:
        own = bus.keys.spawn_local("s1")
        bad = request("p0").model_dump(mode="json") | {"meta": {"approve": "always"}}
        async with Redis.from_url(redis_server.url) as admin:
            await admin.xadd(own, {"req": json.dumps(bad)})  # a foreign producer's request
        await bus.submit_spawn(request("p1", approve="auto"))
        claim = await bus.claim_spawn(SpawnQueue.of_session("s1"), timeout=5)
        assert claim is not None and claim.request.agent == "p1"  # the bad one never runs
        [letter] = await bus.dead_letters()
        assert letter.source == own and "meta.approve must be" in letter.reason
        assert "'always'" in letter.reason

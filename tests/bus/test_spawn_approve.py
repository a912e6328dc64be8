"""A spawn request carries the session's approval policy (its ``approve`` field, wire version 2)
to whichever worker claims it (docs/protocol.md, *Approvals*): it survives the trip on both
backends, a request without it means ``ask``, one whose policy is no policy is dead-lettered,
never guessed, and a version-1 request's ``meta.approve`` and ``meta.key_id`` are still read."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from baton.bus.base import SpawnQueue
from baton.bus.errors import InvalidEnvelope
from baton.bus.messages import LOCAL_POOL, SpawnRequest, parse_spawn_request
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.conftest import BusFactory

BASE = {"session": "s1", "profile": "publisher", "pool": LOCAL_POOL}


def request(agent: str, **fields: object) -> SpawnRequest:
    return SpawnRequest.model_validate({**BASE, "agent": agent, **fields})


@pytest.mark.parametrize("policy", ["ask", "auto", "deny"])
async def test_the_policy_reaches_the_claiming_worker(make_bus: BusFactory, policy: str) -> None:
    async with make_bus(consumer="host") as bus:
        await bus.spawns.submit(request("p1", approve=policy))
        claim = await bus.claims.claim(SpawnQueue.of_session("s1"), timeout=5)
        assert claim is not None and claim.request.approve == policy


def test_a_request_is_written_as_version_2_with_its_policy_and_key_id_as_fields() -> None:
    written = json.loads(request("p1", approve="deny", key_id="k1").model_dump_json())
    assert (written["v"], written["approve"], written["key_id"], written["meta"]) == (
        2, "deny", "k1", {}
    )  # fmt: skip
    assert "key_id" not in json.loads(request("p1").model_dump_json())  # not said: left out


def test_a_version_1_request_is_still_read() -> None:
    raw = json.dumps({"v": 1, **BASE, "agent": "p1",
                      "meta": {"approve": "auto", "key_id": "k1", "note": "kept"}})  # fmt: skip
    read = parse_spawn_request(raw)
    assert (read.approve, read.key_id, read.meta) == ("auto", "k1", {"note": "kept"})
    rewritten = json.loads(read.model_dump_json())
    assert (rewritten["v"], rewritten["approve"]) == (2, "auto")
    assert parse_spawn_request(json.dumps(rewritten)) == read.model_copy(update={"v": 2})


def test_a_request_without_a_policy_asks_and_a_bad_one_is_refused() -> None:
    assert request("p1").approve == "ask"
    for bad in ("yes", True, ["auto"]):
        v1 = {"v": 1, **BASE, "agent": "p1", "meta": {"approve": bad}}
        v2 = {"v": 2, **BASE, "agent": "p1", "approve": bad}
        for raw in (v1, v2):
            with pytest.raises(InvalidEnvelope, match=r"approve must be 'ask', 'auto' or 'deny'"):
                parse_spawn_request(json.dumps(raw))


def test_a_version_2_request_with_the_old_meta_keys_is_refused() -> None:
    """One of the two would be silently ignored: a v2 producer that wrote ``meta.approve:
    deny`` would have its calls asked of a person instead."""
    raw = json.dumps({"v": 2, **BASE, "agent": "p1", "meta": {"approve": "deny"}})
    with pytest.raises(InvalidEnvelope, match=r"meta\.approve is version 1's"):
        parse_spawn_request(raw)


async def test_a_request_with_a_bad_policy_is_dead_lettered(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="badpolicy") as bus:
        own = bus.keys.spawn_local("s1")
        bad = {"v": 1, **BASE, "agent": "p0", "meta": {"approve": "always"}}
        async with Redis.from_url(redis_server.url) as admin:
            await admin.xadd(own, {"req": json.dumps(bad)})  # a foreign producer's request
        await bus.spawns.submit(request("p1", approve="auto"))
        claim = await bus.claims.claim(SpawnQueue.of_session("s1"), timeout=5)
        assert claim is not None and claim.request.agent == "p1"  # the bad one never runs
        [letter] = await bus.letters.recent()
        assert letter.source == own and "approve must be" in letter.reason
        assert "'always'" in letter.reason

"""Consumers are deleted once they hold nothing, never with a pending entry; the sessions' index
forgets a session whose keys expired. On a real ``redis-server`` (``docs/bus.md``, *Retention*)."""

from __future__ import annotations

import itertools

import anyio

from baton.bus.base import BusOptions, SpawnQueue
from baton.bus.events import SessionFinished, SessionStarted
from baton.bus.messages import SpawnRequest, make_envelope
from baton.bus.parts.retention import Leftovers
from baton.bus.redis import RedisBus
from baton.bus.redis.consumers import drop_consumers
from baton.bus.redis.keys import INBOX_GROUP, SPAWN_GROUP
from baton.testing import RedisServer

_prefixes = itertools.count()


def fresh_prefix() -> str:
    return f"retc{next(_prefixes)}"


async def consumers(bus: RedisBus, key: str, group: str) -> dict[str, int]:
    """The group's consumers and how many entries each holds."""
    rows = await bus._core.one("XINFO", "CONSUMERS", key, group)
    infos = [dict(zip(row[::2], row[1::2], strict=True)) for row in rows]
    return {str(info["name"]): int(info["pending"]) for info in infos}


async def test_a_consumer_holding_an_entry_is_kept_and_an_empty_one_deleted(
    redis_server: RedisServer,
) -> None:
    async with RedisBus(redis_server.url, prefix=fresh_prefix()) as bus:
        core, key = bus._core, f"{bus.keys.prefix}:stream"
        await core.one("XGROUP", "CREATE", key, "g", "0", "MKSTREAM")
        held = await core.one("XADD", key, "*", "f", "held")
        done = await core.one("XADD", key, "*", "f", "done")
        await core.one("XREADGROUP", "GROUP", "g", "holder", "COUNT", 1, "STREAMS", key, ">")
        await core.one("XREADGROUP", "GROUP", "g", "finisher", "COUNT", 1, "STREAMS", key, ">")
        await core.one("XACK", key, "g", done)
        assert await consumers(bus, key, "g") == {"holder": 1, "finisher": 0}

        ten_minutes = 600_000
        assert await drop_consumers(core, [key], "g", ten_minutes) == 0  # idle moments only
        assert await drop_consumers(core, [key], "g", 0) == 1
        assert await consumers(bus, key, "g") == {"holder": 1}
        [[entry_id, owner, _, deliveries]] = await core.one("XPENDING", key, "g", "-", "+", 10)
        assert (entry_id, owner, deliveries) == (held, "holder", 1)  # never lost


async def test_retiring_a_session_deletes_its_empty_consumers_and_keeps_a_holding_one(
    redis_server: RedisServer,
) -> None:
    prefix = fresh_prefix()
    async with (
        RedisBus(redis_server.url, prefix=prefix) as first,
        RedisBus(redis_server.url, prefix=prefix) as second,
    ):
        session, inbox = "s-consumers", first.keys.inbox("s-consumers", "painter")
        to_painter = {"session": session, "sender": "lead", "recipient": "painter", "type": "task"}
        one = make_envelope(**to_painter, content="one")
        two = make_envelope(**to_painter, content="two")
        await first.inboxes.send(one)
        assert [e.id for e in await first.inboxes.read(session, "painter")] == [one.id]
        await first.inboxes.ack(session, "painter", [one.id])
        await first.inboxes.send(two)
        assert [e.id for e in await second.inboxes.read(session, "painter")] == [two.id]
        await second.inboxes.hand_back(session, "painter")  # handed back: held by "<c>:released"
        released = f"{second.consumer}:released"
        assert await consumers(first, inbox, INBOX_GROUP) == {
            first.consumer: 0,
            second.consumer: 0,
            released: 1,
        }

        retired = await first.retention.retire(session, 60, Leftovers(["painter"], ["painter"]))
        assert (retired.consumers, retired.dropped) == (2, 0)
        assert await consumers(first, inbox, INBOX_GROUP) == {released: 1}
        assert 0 < await first._core.one("PTTL", inbox) <= 60_000
        # the entry held by the released name is still there for whoever reads next
        assert [e.id for e in await first.inboxes.read(session, "painter")] == [two.id]


async def test_a_pool_worker_deletes_the_idle_empty_consumers_of_its_streams(
    redis_server: RedisServer,
) -> None:
    """A worker that died leaves its consumer name on the pool's streams (which outlive every
    session); a live worker of the pool deletes it once idle, and never one holding a claim."""
    prefix = fresh_prefix()
    lease_s = 0.05  # idle for two leases, 0.1 s, is gone
    queue = SpawnQueue.of_pool("default", ["painter"])
    stream = f"{prefix}:spawn:{{default}}:painter"

    def request(agent: str) -> SpawnRequest:
        return SpawnRequest(session="s-pool", agent=agent, profile="painter")

    async with (
        RedisBus(redis_server.url, BusOptions(lease_s=lease_s), prefix=prefix) as dead,
        RedisBus(redis_server.url, BusOptions(lease_s=60), prefix=prefix) as holder,
        RedisBus(redis_server.url, BusOptions(lease_s=lease_s), prefix=prefix) as live,
    ):
        await dead.spawns.submit(request("p1"))
        claim = await dead.claims.claim(queue)
        assert claim is not None
        await dead.claims.ack([claim.receipt])  # done: its consumer holds nothing
        await holder.spawns.submit(request("p2"))
        held = await holder.claims.claim(queue)
        assert held is not None  # running: held
        assert set(await consumers(live, stream, SPAWN_GROUP)) == {dead.consumer, holder.consumer}

        await anyio.sleep(4 * lease_s)  # idle time has to pass: that is what is tested
        assert await holder.claims.renew([held.receipt]) == [held.receipt]  # alive, and running
        assert await live.claims.claim(queue) is None  # nothing to claim: it sweeps meanwhile
        left = await consumers(live, stream, SPAWN_GROUP)
        assert left == {holder.consumer: 1, live.consumer: 0}  # the dead one's name is gone


async def test_the_sessions_index_forgets_sessions_whose_keys_expired(
    redis_server: RedisServer,
) -> None:
    async with RedisBus(redis_server.url, prefix=fresh_prefix()) as bus:
        core = bus._core
        for session in ("s-old", "s-new"):
            await bus.log.emit(SessionStarted(session=session, agent="lead", task="t"))
            await bus.log.emit(SessionFinished(session=session, agent="lead", status="completed"))
        assert await bus.retention.expiry("s-old") is None  # its end logged, no lifetime set yet
        await bus.retention.retire("s-old", 0.05)
        await anyio.sleep(0.2)  # its TTL has to run out: that is what is tested
        assert not await core.one("EXISTS", bus.keys.events("s-old"))
        assert await bus.retention.expiry("s-old") == 0.0
        assert await bus.log.sessions() == ["s-new"]  # listing forgets it
        assert await core.one("ZSCORE", bus.keys.sessions, "s-old") is None

        # a process that never lists: each session's end forgets long-gone ones
        await core.one("ZADD", bus.keys.sessions, 1.0, "s-ancient")  # its keys expired long ago
        await bus.retention.retire("s-new", 3600)
        assert await core.one("ZSCORE", bus.keys.sessions, "s-ancient") is None
        assert await core.one("ZSCORE", bus.keys.sessions, "s-new") is not None

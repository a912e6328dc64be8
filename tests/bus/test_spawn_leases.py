"""A worker's lease on its spawn requests is its member of one sorted set per hash tag, not
each entry's idle time (``bus/redis/claims.py``, ``scripts/keep_lease.lua``), on one node and on
a cluster.

A beat must touch no entry (that was 50,000 ``XCLAIM`` calls every beat at 100,000 agents); a
claimant must take nothing from a worker whose lease lives, however long its entries sat; and a
worker must still learn of every entry taken over while its lease had lapsed, whichever reply of
its own said so: its beat's, or a claim's that made it live again first.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from baton.bus.base import Bus
from baton.bus.messages import DEFAULT_POOL, SpawnRequest
from baton.bus.parts.claims import SpawnQueue
from baton.bus.redis import RedisBus
from baton.bus.redis.claims import RedisClaims
from baton.bus.redis.keys import SPAWN_GROUP
from baton.bus.redis.scripts import ANNOUNCE_WORKER
from tests.conftest import BusFactory

P = SpawnQueue.of_pool(DEFAULT_POOL, ["p"])
TEN_MINUTES_MS = 600_000


@pytest.fixture(params=["redis", "redis-cluster"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def redis(bus: Bus) -> RedisBus:
    assert isinstance(bus, RedisBus)
    return bus


def leases(bus: Bus) -> str:
    keys = redis(bus).keys
    return keys.spawn_leases(keys.spawn_wake(DEFAULT_POOL))


async def lease_left_ms(bus: Bus) -> int | None:
    """How long the bus's lease has left by the server's clock; None when it has lapsed."""
    lapses_at = await one(bus, "ZSCORE", leases(bus), bus.consumer)
    seconds, micros = await one(bus, "TIME")
    left = round(float(lapses_at) - (int(seconds) * 1000 + int(micros) // 1000)) if lapses_at else 0
    return left if left > 0 else None


async def lapse(bus: Bus) -> None:
    """The bus's lease lapses (a stalled worker)."""
    await one(bus, "ZREM", leases(bus), bus.consumer)


async def one(bus: Bus, *command: str | int) -> Any:
    return await redis(bus)._core.one(*command)


async def claim(bus: Bus, agent: str) -> str:
    await bus.spawns.submit(SpawnRequest(session="s1", agent=agent, profile="p"))
    got = await bus.claims.claim(P, timeout=5)
    assert got is not None and got.request.agent == agent
    return got.receipt


async def age(bus: Bus, receipt: str, idle_ms: int = TEN_MINUTES_MS) -> None:
    """Make the entry look untouched for ``idle_ms``, its consumer unchanged (as a worker whose
    entries are never renewed one by one would leave it)."""
    entry_id, _, stream = receipt.partition("@")
    owner = await one(bus, "XPENDING", stream, SPAWN_GROUP, entry_id, entry_id, 1)
    await one(bus, "XCLAIM", stream, SPAWN_GROUP, owner[0][1], 0, entry_id, "IDLE", idle_ms,
              "JUSTID")  # fmt: skip


async def idle_ms(bus: Bus, receipt: str) -> int:
    entry_id, _, stream = receipt.partition("@")
    pending = await one(bus, "XPENDING", stream, SPAWN_GROUP, entry_id, entry_id, 1)
    return int(pending[0][2])


async def test_a_beat_moves_its_lease_on_and_touches_no_entry(make_bus: BusFactory) -> None:
    async with make_bus(lease_s=60, consumer="mine") as mine:
        receipts = [await claim(mine, f"a{n}") for n in range(30)]
        for receipt in receipts:
            await age(mine, receipt)
        await one(mine, "ZINCRBY", leases(mine), -55_000, "mine")  # most of a lease gone by
        assert (await lease_left_ms(mine) or 0) < 10_000
        assert sorted(await mine.claims.renew(receipts)) == sorted(receipts)
        assert (await lease_left_ms(mine) or 0) > 50_000  # a whole lease again
        assert min([await idle_ms(mine, r) for r in receipts]) >= TEN_MINUTES_MS  # untouched


async def test_a_live_lease_keeps_entries_idle_past_it(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=60, consumer="mine") as mine,
        make_bus(lease_s=60, consumer="heir") as heir,
    ):
        receipt = await claim(mine, "a")
        await age(mine, receipt)
        assert await heir.claims.claim(P, timeout=0) is None  # the lease lives: still mine
        await lapse(mine)
        async with make_bus(lease_s=60, consumer="heir2") as heir2:  # its first claim looks
            taken = await heir2.claims.claim(P, timeout=0)
        assert taken is not None and taken.receipt == receipt


async def test_a_beat_that_finds_its_lease_lapsed_learns_what_was_taken(
    make_bus: BusFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with (
        make_bus(lease_s=60, consumer="mine") as mine,
        make_bus(lease_s=60, consumer="heir") as heir,
    ):
        kept, lost = await claim(mine, "kept"), await claim(mine, "lost")
        await age(mine, lost)
        await lapse(mine)
        taken = await heir.claims.claim(P, timeout=0)
        assert taken is not None and taken.receipt == lost
        assert await mine.claims.renew([kept, lost]) == [kept]
        assert any("taken over while our lease" in r.getMessage() for r in caplog.records)
        assert await lease_left_ms(mine)  # live again: nothing more goes
        assert await mine.claims.renew([kept, lost]) == [kept]  # and the lost one stays lost
        assert await heir.claims.renew([taken.receipt]) == [taken.receipt]


async def test_a_claim_that_finds_its_lease_lapsed_has_the_beat_look(
    make_bus: BusFactory,
) -> None:
    """The claim's script makes the lease live with the entry it hands out. Had it said nothing,
    the next beat would find the lease live and keep running an agent another worker has."""
    async with (
        make_bus(lease_s=60, consumer="mine") as mine,
        make_bus(lease_s=60, consumer="heir") as heir,
    ):
        lost = await claim(mine, "lost")
        await age(mine, lost)
        await lapse(mine)
        taken = await heir.claims.claim(P, timeout=0)
        assert taken is not None and taken.receipt == lost
        new = await claim(mine, "new")  # makes the lease live again, and says it had lapsed
        assert await mine.claims.renew([lost, new]) == [new]


async def test_a_lapse_with_nothing_taken_keeps_every_agent(make_bus: BusFactory) -> None:
    async with make_bus(lease_s=60, consumer="mine") as mine:
        receipts = [await claim(mine, f"a{n}") for n in range(5)]
        await lapse(mine)
        assert sorted(await mine.claims.renew(receipts)) == sorted(receipts)
        assert await lease_left_ms(mine)


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_after_a_fault_the_beat_checks_every_entry(make_bus: BusFactory) -> None:
    """A failover can lose our delivery while the lease survives, and the entry goes to another
    worker: only a check of each entry can tell. Here the delivery is moved by hand (as the
    new master's state would have it), and the fault is a killed connection."""
    async with (
        make_bus(lease_s=60, consumer="mine") as mine,
        make_bus(lease_s=60, consumer="other") as other,
    ):
        kept, moved = await claim(mine, "kept"), await claim(mine, "moved")
        entry_id, _, stream = moved.partition("@")
        await one(other, "XCLAIM", stream, SPAWN_GROUP, "other", 0, entry_id, "JUSTID")
        # With no fault and the lease live nothing can have moved it: the beat trusts the lease.
        assert sorted(await mine.claims.renew([kept, moved])) == sorted([kept, moved])
        await one(other, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        assert await mine.claims.renew([kept, moved]) == [kept]


async def test_a_first_look_at_streams_that_do_not_exist_yet_makes_them(
    make_bus: BusFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The look for lapsed leases lists a stream's consumers; on a key that is not there yet
    Redis answers ``no such key`` (where it says ``NOGROUP`` to a read), which must make the
    stream and its group like any first read, not mark the stream unreadable."""
    caplog.set_level(logging.WARNING)
    queue = SpawnQueue.of_pool(DEFAULT_POOL, ["p", "q", "r"])
    async with make_bus(lease_s=60, consumer="first") as first:
        assert await first.claims.claim(queue, timeout=0) is None
        assert [r.getMessage() for r in caplog.records] == []
        streams, _ = redis(first).keys.spawn_queue(queue)
        for stream in streams:
            assert await one(first, "TYPE", stream) == "stream"


async def test_the_check_after_a_lapse_answers_for_every_receipt_across_chunks(
    make_bus: BusFactory,
) -> None:
    """600 requests over two streams: the check runs in chunks (``RENEW_CHUNK``), and finds
    exactly the 20 that another worker took while the lease had lapsed."""
    queue = SpawnQueue.of_pool(DEFAULT_POOL, ["p", "q"])
    async with (
        make_bus(lease_s=60, consumer="mine") as mine,
        make_bus(lease_s=60, consumer="heir") as heir,
    ):
        for n in range(600):
            profile = "pq"[n % 2]
            await mine.spawns.submit(SpawnRequest(session="s1", agent=f"a{n}", profile=profile))
        receipts = []
        for _ in range(600):
            got = await mine.claims.claim(queue, timeout=5)
            assert got is not None
            receipts.append(got.receipt)
        for receipt in receipts[100:600:25]:
            await age(mine, receipt)
        await lapse(mine)
        taken = []
        for _ in range(20):
            got = await heir.claims.claim(queue, timeout=0)
            assert got is not None
            taken.append(got.receipt)
        assert sorted(taken) == sorted(receipts[100:600:25])
        assert sorted(await mine.claims.renew(receipts)) == sorted(set(receipts) - set(taken))


async def test_a_worker_of_an_earlier_release_in_the_pool_is_named_once(
    make_bus: BusFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """An earlier release takes over any request idle a lease, so the live agents of this
    release's workers: the rule cannot be kept by the new workers alone, so they say so."""
    caplog.set_level(logging.WARNING)
    async with make_bus(consumer="new") as new:
        key = redis(new).keys.workers(DEFAULT_POOL)
        earlier = json.dumps({"worker": "old-1", "profiles": ["p"]})  # as that release wrote it
        await one(new, *ANNOUNCE_WORKER.call(key, earlier, 60_000))
        await new.workers.announce(DEFAULT_POOL, "new-2", ["p"], 30)
        for _ in range(2):
            await new.workers.announce(DEFAULT_POOL, "new-1", ["p"], 30)
        named = [m for r in caplog.records if "earlier baton release" in (m := r.getMessage())]
        assert len(named) == 1 and "worker old-1 " in named[0]
        live = await new.workers.live(DEFAULT_POOL)
        assert live == {"old-1": {"p"}, "new-1": {"p"}, "new-2": {"p"}}  # still read alike


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_every_request_found_pending_to_us_after_a_fault_is_handed_out(
    make_bus: BusFactory,
) -> None:
    """Claims whose replies were lost leave requests delivered to us that nobody hosts. No
    other worker takes them while our lease lives, so each must come back from our own claims,
    not only the first one found."""
    async with (
        make_bus(lease_s=60, consumer="mine") as mine,
        make_bus(lease_s=60, consumer="other") as other,
    ):
        assert await claim(mine, "seen")  # our lease is live
        stream = redis(mine).keys.spawn_pool(DEFAULT_POOL, "p")
        for agent in ("x", "y", "z"):  # delivered to us, their replies lost
            await mine.spawns.submit(SpawnRequest(session="s1", agent=agent, profile="p"))
        await one(other, "XREADGROUP", "GROUP", SPAWN_GROUP, "mine", "COUNT", 3, "STREAMS",
                  stream, ">")  # fmt: skip
        await one(other, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")  # the fault
        # The first claim may meet the fault only after its look at our own pending: one more.
        got = [await mine.claims.claim(P, timeout=0) for _ in range(4)]
        assert sorted(c.request.agent for c in got if c is not None) == ["x", "y", "z"]


async def test_a_sessions_lease_is_forgotten_once_its_worker_left_and_holds_nothing(
    make_bus: BusFactory,
) -> None:
    """A long-running process (``baton serve``) meets one session stream per session it hosts:
    each lease it kept in memory must go once the session's worker is done with it."""
    own = SpawnQueue.of_session("s1")
    async with make_bus(lease_s=60, consumer="serve") as serve:
        claims = serve.claims
        assert isinstance(claims, RedisClaims)
        await serve.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p", pool="local"))
        got = await claims.claim(own, timeout=5)
        assert got is not None
        await claims.leave(own)  # the worker stops claiming before its agents are given back
        assert claims._by_key and claims._leases  # still held: still kept
        assert await claims.renew([got.receipt]) == [got.receipt]
        await claims.release([got.receipt])
        assert not claims._by_key and not claims._leases

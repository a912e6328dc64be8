"""The ``Claims`` contract (:class:`baton.bus.parts.claims.Claims`), on the memory bus and on
real Redis: each request to exactly one worker whose queue holds it, under a lease that is renewed
while it runs, taken over once it lapses, and handed back at once on a drain."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio

from baton.bus.base import Bus
from baton.bus.messages import DEFAULT_POOL, SpawnRequest
from baton.bus.parts.claims import SpawnQueue
from tests.conftest import BusFactory

P = SpawnQueue.of_pool(DEFAULT_POOL, ["p"])
"""The default pool's queue for the profile these tests spawn."""


async def test_spawn_queue_each_request_to_exactly_one_worker(make_bus: BusFactory) -> None:
    async with AsyncExitStack() as stack:
        workers = [await stack.enter_async_context(make_bus(consumer=f"w{i}")) for i in range(5)]
        submitted = {
            await workers[0].spawns.submit(
                SpawnRequest(session="s1", agent=f"a{i}", profile="p")
            ): i
            for i in range(60)
        }
        claims: dict[str, list[str]] = {}

        async def work(bus: Bus) -> None:
            while (claim := await bus.claims.claim(P, timeout=0.5)) is not None:
                claims.setdefault(claim.request.agent, []).append(bus.consumer)
                await bus.claims.ack([claim.receipt])
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            for bus in workers:
                tg.start_soon(work, bus)
        assert len(submitted) == 60
        assert sorted(claims) == sorted(f"a{i}" for i in range(60))
        assert all(len(owners) == 1 for owners in claims.values())
        assert len({o[0] for o in claims.values()}) > 1  # the work really was shared


async def test_spawn_claim_moves_on_when_lease_expires(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="dead") as dead,
        make_bus(lease_s=0.3, consumer="heir") as heir,
    ):
        await dead.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p"))
        first = await dead.claims.claim(P, timeout=5)
        assert first is not None
        assert await heir.claims.claim(P, timeout=0) is None
        second = await heir.claims.claim(P, timeout=10)
        assert second is not None and second.request == first.request


async def test_spawn_release_hands_over_at_once(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=60, consumer="leaving") as leaving,
        make_bus(lease_s=60, consumer="staying") as staying,
    ):
        await leaving.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p"))
        claim = await leaving.claims.claim(P, timeout=5)
        assert claim is not None
        await leaving.claims.renew([claim.receipt])
        assert await staying.claims.claim(P, timeout=0) is None
        await leaving.claims.release([claim.receipt])
        taken = await staying.claims.claim(P, timeout=5)
        assert taken is not None and taken.request.agent == "a"


async def test_renewal_never_takes_a_request_back(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="stalled") as stalled,
        make_bus(lease_s=0.3, consumer="heir") as heir,
    ):
        await stalled.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p"))
        mine = await stalled.claims.claim(P, timeout=5)
        assert mine is not None
        assert await stalled.claims.renew([mine.receipt]) == [mine.receipt]
        taken = await heir.claims.claim(P, timeout=10)  # the stalled worker's lease lapses
        assert taken is not None and taken.receipt == mine.receipt
        assert await stalled.claims.renew([mine.receipt]) == []  # too late: it is the heir's
        assert await heir.claims.renew([taken.receipt]) == [taken.receipt]


async def test_a_renewal_racing_a_hand_back_does_not_take_it_back(make_bus: BusFactory) -> None:
    """A stopping worker's heartbeat may still renew receipts it is handing back: were they
    still its own by name, the renewal made them leased again, and another worker waited a lease
    for each (benchmarks/scale.py: 250-750 of 12,500 after a stop)."""
    async with (
        make_bus(lease_s=60, consumer="leaving") as leaving,
        make_bus(lease_s=60, consumer="staying") as staying,
    ):
        for agent in ("a", "b"):
            await leaving.spawns.submit(SpawnRequest(session="s1", agent=agent, profile="p"))
        claims = [await leaving.claims.claim(P, timeout=5) for _ in range(2)]
        receipts = [claim.receipt for claim in claims if claim is not None]
        await leaving.claims.release(receipts)
        assert await leaving.claims.renew(receipts) == []  # handed back: no longer ours
        taken = [await staying.claims.claim(P, timeout=5) for _ in range(2)]
        assert sorted(claim.request.agent for claim in taken if claim is not None) == ["a", "b"]


async def test_a_hand_back_never_takes_a_request_from_its_new_owner(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="stalled") as stalled,
        make_bus(lease_s=0.3, consumer="heir") as heir,
    ):
        await stalled.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p"))
        mine = await stalled.claims.claim(P, timeout=5)
        assert mine is not None
        taken = await heir.claims.claim(P, timeout=10)  # the stalled worker's lease lapses
        assert taken is not None and taken.receipt == mine.receipt
        await stalled.claims.release([mine.receipt])  # too late: it is the heir's
        assert await heir.claims.renew([taken.receipt]) == [taken.receipt]


async def test_a_renewal_of_more_than_one_chunk_answers_for_each_receipt(
    make_bus: BusFactory,
) -> None:
    """Where a renewal must ask about each receipt (Redis: one it never handed out, as the
    other's here, or each after a lapse: tests/bus/test_spawn_leases.py), it asks in chunks
    (``RENEW_CHUNK`` entries an operation, so one script never holds a node for long); what
    comes back is the same: every receipt still ours, across streams and chunks, and none that
    is another's."""
    async with make_bus(consumer="mine") as mine, make_bus(consumer="other") as other:
        for n in range(320):  # two sessions' streams: the chunks cut across them
            await mine.spawns.submit(SpawnRequest(session=f"s{n % 2}", agent=f"a{n}", profile="p"))
        claims = []
        for _ in range(300):
            claim = await mine.claims.claim(P, timeout=5)
            assert claim is not None
            claims.append(claim.receipt)
        theirs = []
        for _ in range(20):
            claim = await other.claims.claim(P, timeout=5)
            assert claim is not None
            theirs.append(claim.receipt)
        held = await mine.claims.renew([*claims, *theirs])
        assert sorted(held) == sorted(claims)


async def test_a_renewal_answers_for_receipts_in_any_order_among_anothers(
    make_bus: BusFactory,
) -> None:
    """Two workers' claims interleave in the stream; asked in reverse order, with the other's
    mixed in, a renewal answers for each of its own and none of the other's (Redis reads our
    entries between the lowest and highest id asked: whatever the order they come in)."""
    async with make_bus(consumer="mine") as mine, make_bus(consumer="other") as other:
        for n in range(40):
            await mine.spawns.submit(SpawnRequest(session="s1", agent=f"a{n}", profile="p"))
        ours: list[str] = []
        theirs: list[str] = []
        for n in range(40):
            claim = await (mine if n % 2 else other).claims.claim(P, timeout=5)
            assert claim is not None
            (ours if n % 2 else theirs).append(claim.receipt)
        asked = [*reversed(ours[5:]), *theirs, *ours[:5]]
        assert sorted(await mine.claims.renew(asked)) == sorted(ours)
        assert sorted(await other.claims.renew(asked)) == sorted(theirs)


async def test_an_acked_request_is_never_claimed_again(make_bus: BusFactory) -> None:
    async with make_bus(lease_s=0.3, consumer="w1") as w1, make_bus(lease_s=0.3) as w2:
        receipt = await w1.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p"))
        claim = await w1.claims.claim(P, timeout=5)
        assert claim is not None and claim.receipt == receipt
        await w1.claims.ack([claim.receipt])
        assert await w1.spawns.states([receipt]) == {receipt: "gone"}
        assert await w2.claims.claim(P, timeout=1) is None  # past a lease: still nothing


async def test_a_claim_waits_for_a_request_to_arrive(make_bus: BusFactory) -> None:
    async with make_bus() as session, make_bus(consumer="worker") as worker:
        claimed: list[str] = []

        async def claim() -> None:
            got = await worker.claims.claim(P, timeout=30)
            claimed.append(got.request.agent if got is not None else "")

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(claim)
                await anyio.wait_all_tasks_blocked()
                await session.spawns.submit(SpawnRequest(session="s1", agent="late", profile="p"))
        assert claimed == ["late"]


async def test_a_worker_of_another_queue_never_sees_the_request(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.spawns.submit(SpawnRequest(session="s1", agent="a", profile="p"))
        assert await bus.claims.claim(SpawnQueue.of_pool(DEFAULT_POOL, ["other"])) is None
        assert await bus.claims.claim(SpawnQueue.of_session("s1")) is None
        claim = await bus.claims.claim(P)
        assert claim is not None and claim.request.agent == "a"

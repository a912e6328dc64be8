"""The ``Spawns`` contract (:class:`baton.bus.parts.spawns.Spawns`), on the memory bus and on
real Redis: a request goes where its route says, with the bus's key id, its watchers hear of it,
its receipt tells where it stands, and a session takes back what no worker claimed."""

from __future__ import annotations

from pydantic import SecretStr

from baton.bus.messages import LOCAL_POOL, SpawnRequest, make_envelope
from baton.bus.parts.claims import SpawnQueue
from baton.bus.signing import key_id
from tests.conftest import BusFactory

S = "s-spawns"


def request(agent: str, **fields: str) -> SpawnRequest:
    return SpawnRequest(session=S, agent=agent, profile="painter", **fields)


async def test_a_request_is_stamped_with_the_key_id_and_told_to_the_watcher(
    make_bus: BusFactory,
) -> None:
    key = SecretStr("k")
    heard: list[tuple[str, str]] = []
    async with make_bus(signing_key=key) as bus:
        stop = bus.spawns.watch(S, lambda req, receipt: heard.append((req.agent, receipt)))
        receipt = await bus.spawns.submit(request("a1"))
        stop()
        await bus.spawns.submit(request("a2"))  # no longer watched
        assert heard == [("a1", receipt)]
        claim = await bus.claims.claim(SpawnQueue.of_pool("default", ["painter"]))
        assert claim is not None and claim.request.key_id == key_id(key)


async def test_a_receipt_says_where_its_request_stands(make_bus: BusFactory) -> None:
    async with make_bus() as bus, make_bus(consumer="worker") as worker:
        receipts = [await bus.spawns.submit(request(f"a{i}")) for i in range(2)]
        assert await bus.spawns.states(receipts) == dict.fromkeys(receipts, "queued")
        claim = await worker.claims.claim(SpawnQueue.of_pool("default", ["painter"]))
        assert claim is not None and claim.receipt in receipts
        other = next(r for r in receipts if r != claim.receipt)
        assert await bus.spawns.states(receipts) == {claim.receipt: "claimed", other: "queued"}
        await worker.claims.ack([claim.receipt])
        assert (await bus.spawns.states([claim.receipt]))[claim.receipt] == "gone"


async def test_withdrawing_takes_back_only_the_unclaimed_and_their_inboxes(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus, make_bus(consumer="worker") as worker:
        taken = await bus.spawns.submit(request("taken"))
        claim = await worker.claims.claim(SpawnQueue.of_pool("default", ["painter"]))
        assert claim is not None and claim.receipt == taken
        waiting = await bus.spawns.submit(request("waiting"))
        await bus.inboxes.send(
            make_envelope(session=S, sender="lead", recipient="waiting", type="task", content="x")
        )
        assert await bus.spawns.withdraw([taken, waiting]) == [waiting]
        assert await bus.spawns.states([taken, waiting]) == {taken: "claimed", waiting: "gone"}
        assert await worker.inboxes.read(S, "waiting") == []  # it never ran: its inbox went too


async def test_a_sessions_own_queue_is_dropped_with_what_is_left(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        for agent in ("a1", "a2"):
            await bus.spawns.submit(request(agent, pool=LOCAL_POOL))
        assert await bus.spawns.drop_queue(S) == 2
        assert await bus.claims.claim(SpawnQueue.of_session(S)) is None
        assert await bus.spawns.drop_queue(S) == 0

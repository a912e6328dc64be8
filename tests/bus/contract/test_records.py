"""The ``Records`` contract (:class:`baton.bus.parts.records.Records`), on the memory bus and on
real Redis: agent records merge, and the lead's lease lets one holder write at a time."""

from __future__ import annotations

from tests.conftest import BusFactory


async def test_agent_state_round_trip(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.records.agent("s1", "a") == {}
        await bus.records.set_agent("s1", "a", {"status": "running", "worker": "w1"})
        await bus.records.set_agent("s1", "a", {"status": "done"})
        assert await bus.records.agent("s1", "a") == {"status": "done", "worker": "w1"}


async def test_records_are_shared_between_processes_and_kept_apart_per_agent(
    make_bus: BusFactory,
) -> None:
    async with make_bus(consumer="one") as one, make_bus(consumer="two") as two:
        await one.records.set_agent("s1", "a", {"status": "running"})
        await two.records.set_agent("s1", "b", {"status": "idle"})
        await two.records.set_agent("s2", "a", {"status": "done"})
        assert await two.records.agent("s1", "a") == {"status": "running"}
        assert await one.records.agent("s1", "b") == {"status": "idle"}
        assert await one.records.agent("s2", "a") == {"status": "done"}


async def test_the_lead_lease_has_one_holder_and_fences_the_record(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.records.lead_lease("s1") is None and await bus.records.lead("s1") == {}
        held = await bus.records.hold_lead("s1", "lead-1", 60, {"status": "running"})
        assert held.held
        refused = await bus.records.hold_lead("s1", "lead-2", 60, {"status": "stolen"})
        assert not refused.held and refused.holder == "lead-1" and 0 < refused.ttl_s <= 60
        assert await bus.records.lead("s1") == {"status": "running"}  # nothing written
        lease = await bus.records.lead_lease("s1")
        assert lease is not None and lease.holder == "lead-1" and 0 < lease.ttl_s <= 60
        assert (await bus.records.hold_lead("s1", "lead-1", 0, {"status": "finished"})).held
        assert await bus.records.lead_lease("s1") is None  # given up with its last write
        assert await bus.records.lead("s1") == {"status": "finished"}

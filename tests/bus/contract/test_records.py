"""The ``Records`` contract (:class:`baton.bus.parts.records.Records`), on the memory bus and on
real Redis: agent records merge, and the lead's lease lets one holder write at a time."""

from __future__ import annotations

import pytest

from baton.bus.errors import SessionNotRunning
from baton.bus.messages import Envelope, make_envelope
from baton.bus.parts.records import LeadLease
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


async def test_a_write_on_condition_of_its_owner_is_made_only_by_that_owner(
    make_bus: BusFactory,
) -> None:
    """A worker's checkpoint is written only while the record names it the owner: once another
    worker took the agent over, the old one's write changes nothing and says so; a record with
    no owner (never claimed) takes no conditional write either."""
    async with make_bus(consumer="one") as one, make_bus(consumer="two") as two:
        assert not await one.records.set_agent("s1", "a", {"step": "1"}, if_owner="w1")
        assert await one.records.agent("s1", "a") == {}  # nothing was created
        await one.records.set_agent("s1", "a", {"owner": "w1", "status": "running"})
        assert await one.records.set_agent("s1", "a", {"step": "1"}, if_owner="w1")
        await two.records.set_agent("s1", "a", {"owner": "w2"})  # taken over
        assert not await one.records.set_agent("s1", "a", {"step": "9"}, if_owner="w1")
        assert await two.records.set_agent("s1", "a", {"step": "2"}, if_owner="w2")
        assert await one.records.agent("s1", "a") == {
            "owner": "w2",
            "status": "running",
            "step": "2",
        }


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


async def test_a_write_on_condition_of_a_read_inbox_waits_for_what_nobody_read(
    make_bus: BusFactory,
) -> None:
    """``if_read``: the lead's closing write and the look at its inbox are one step, so a post
    that lands first is read (the write is refused as ``unread``), and one after it is refused
    by ``send_if_running`` (the status says the lead reads no more): none is lost between."""
    async with make_bus(consumer="lead") as lead, make_bus(consumer="poster") as poster:
        await lead.records.hold_lead("s1", "lead-1", 60, {"status": "running"})
        closing = {"status": "closing"}
        # No inbox yet, and an inbox read to its end: written.
        assert await lead.records.hold_lead("s1", "lead-1", 60, closing, if_read="lead") == (
            LeadLease(held=True)
        )
        await lead.records.hold_lead("s1", "lead-1", 60, {"status": "running"})
        await poster.inboxes.send_if_running(_post("s1", "first"))
        unread = await lead.records.hold_lead("s1", "lead-1", 60, closing, if_read="lead")
        assert unread == LeadLease(held=True, unread=True)
        assert (await lead.records.lead("s1"))["status"] == "running"  # nothing written
        taken = await lead.inboxes.read("s1", "lead")
        assert [envelope.content for envelope in taken] == ["first"]
        assert (await lead.records.hold_lead("s1", "lead-1", 60, closing, if_read="lead")).held
        assert (await lead.records.lead("s1"))["status"] == "closing"
        with pytest.raises(SessionNotRunning):  # from now on a post is refused, not lost
            await poster.inboxes.send_if_running(_post("s1", "late"))
        # Another holder's lease still comes first.
        refused = await poster.records.hold_lead("s1", "lead-2", 60, closing, if_read="lead")
        assert not refused.held and refused.holder == "lead-1"


def _post(session: str, content: str) -> Envelope:
    return make_envelope(
        session=session, sender="user", recipient="lead", type="task", content=content
    )

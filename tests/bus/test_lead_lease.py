"""The lead's lease and record (``hold_lead``, ``lead_record``), on both backends.

One lead at a time holds a session's lease; every write of the lead's record goes through it, so
a lead whose lease another took can no longer write (``docs/protocol.md``, *The lead's
checkpoint and resuming a session*).
"""

from __future__ import annotations

import anyio

from baton.bus.base import LeadLease
from tests.conftest import BusFactory


async def test_one_holder_at_a_time_and_only_the_holder_writes(make_bus: BusFactory) -> None:
    async with make_bus() as one, make_bus() as two:
        assert await one.records.hold_lead("s", "a", 30, {"status": "running", "state": "1"}) == (
            LeadLease(held=True)
        )
        refused = await two.records.hold_lead("s", "b", 30, {"state": "2"})
        assert not refused.held and refused.holder == "a" and 0 < refused.ttl_s <= 30
        assert await one.records.lead("s") == {"status": "running", "state": "1"}  # b wrote nothing
        assert (
            await one.records.hold_lead("s", "a", 30, {"state": "3"})
        ).held  # a renews and writes
        assert (await two.records.lead("s"))["state"] == "3"
        assert await two.records.lead("other") == {}


async def test_a_lapsed_lease_is_anyones_and_the_old_holder_is_fenced_out(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as one, make_bus() as two:
        assert (await one.records.hold_lead("s", "a", 0.2)).held
        await anyio.sleep(0.3)  # a lease in wall time: nothing to wait on but the clock
        assert (await two.records.hold_lead("s", "b", 30, {"owner": "b"})).held
        stale = await one.records.hold_lead("s", "a", 30, {"owner": "a"})
        assert not stale.held and stale.holder == "b"
        assert (await one.records.lead("s"))["owner"] == "b"


async def test_giving_the_lease_up_writes_then_frees_it(make_bus: BusFactory) -> None:
    async with make_bus() as one, make_bus() as two:
        assert (await one.records.hold_lead("s", "a", 30)).held
        assert (await one.records.hold_lead("s", "a", 0, {"status": "finished"})).held
        assert (await two.records.hold_lead("s", "b", 30)).held  # at once, no lapse to wait for
        assert (await two.records.lead("s"))["status"] == "finished"

"""The ``Workers`` contract (:class:`baton.bus.parts.workers.Workers`), on the memory bus and on
real Redis: an announcement lives for its lifetime, is renewed by announcing again, and is
withdrawn at once with a lifetime of 0."""

from __future__ import annotations

import anyio

from tests.conftest import BusFactory


async def test_an_announcement_lives_its_time_and_pools_are_apart(make_bus: BusFactory) -> None:
    async with make_bus() as worker, make_bus() as session:
        assert await session.workers.live("gpu") == {}
        await worker.workers.announce("gpu", "w1", ["painter", "writer"], ttl_s=0.5)
        await worker.workers.announce("gpu", "w1", ["painter", "writer"], ttl_s=60)  # renewed
        await worker.workers.announce("cpu", "w2", ["writer"], ttl_s=0.2)
        assert await session.workers.live("gpu") == {"w1": frozenset({"painter", "writer"})}
        with anyio.fail_after(5):
            while True:  # not renewed: it lapses (nothing tells when; the clock does)
                if not await session.workers.live("cpu"):
                    break
                await anyio.sleep(0.05)
        assert "w1" in await session.workers.live("gpu")  # its renewal outlived the first term
        await worker.workers.announce("gpu", "w1", ["painter", "writer"], ttl_s=0)
        assert await session.workers.live("gpu") == {}

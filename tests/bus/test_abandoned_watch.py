"""A follower that gives up while its wake-up subscription is being made leaves the bus as it
found it (issue 22: one ``GET /sessions/nosuch/events`` wedged ``baton serve`` on Redis).

The SSE route answered 404 and dropped its feed while the feed's tail was subscribing. On Redis
the first watcher of a moment sent SUBSCRIBE for everyone queued behind it; cancelled before it
did, it left its channel queued, and as the queue was only flushed by the watcher that found it
empty, no later channel was ever subscribed again: every session the process started afterwards
waited for wake-ups that could not come. Checked here on the bus itself, on both backends, with
the follower cancelled at each point of its start; and nothing of the abandoned follower stays
subscribed.
"""

from __future__ import annotations

import anyio
import pytest

from baton.bus.base import Bus
from baton.bus.events import SessionStarted
from tests.bus.test_unsubscribe import no_subscription
from tests.conftest import BusFactory
from tests.support.polling import until


async def abandon_tail(bus: Bus, session: str, checkpoints: int) -> None:
    """Follow ``session``'s log and give up after ``checkpoints`` scheduler turns (0: at once)."""
    events = bus.log.tail(session, follow=True)
    async with anyio.create_task_group() as group:

        async def follow() -> None:
            async for _ in events:
                pass

        group.start_soon(follow)
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        group.cancel_scope.cancel()


async def follows_promptly(bus: Bus, session: str) -> None:
    """A follower of a new session sees the event logged after it started, within seconds."""
    got = anyio.Event()

    async def follow() -> None:
        async for logged in bus.log.tail(session, follow=True):
            if isinstance(logged.event, SessionStarted):
                got.set()
                return

    with anyio.fail_after(4):  # a tail looks again every 5 s even without a wake-up
        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            for _ in range(50):  # let it subscribe, so the event comes by wake-up
                await anyio.lowlevel.checkpoint()
            await bus.log.emit(SessionStarted(session=session, agent="lead", task="t"))
            await got.wait()


@pytest.mark.parametrize("checkpoints", [0, 1, 2, 5, 20])
async def test_a_follower_abandoned_while_it_subscribes_leaves_wake_ups_working(
    make_bus: BusFactory, checkpoints: int
) -> None:
    async with make_bus() as bus:
        await abandon_tail(bus, "gone", checkpoints)
        for n in range(3):
            await follows_promptly(bus, f"later{n}")
        await until(no_subscription(bus, "gone"), "the abandoned follower's unsubscribe", 5)


async def test_many_followers_abandoned_together_leave_no_subscription(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        async with anyio.create_task_group() as group:
            for n in range(30):
                group.start_soon(abandon_tail, bus, f"gone{n}", n % 7)
        await follows_promptly(bus, "after")
        for n in range(30):
            await until(no_subscription(bus, f"gone{n}"), f"gone{n} unsubscribed", 5)

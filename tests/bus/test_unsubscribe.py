"""A process hosting session after session stays subscribed only to the sessions it still runs
(issue 12: 600 finished sessions left 600 lead wake-up channels subscribed).

The lead's inboxes (its own and its approvals') are released when its session ends, and so are a
sub-agent's once it exits (its approvals' inbox included, once it asked one). Checked where it
happened: an embedding process (one bus, sessions one after another, on both backends) and
``baton serve`` over real Redis, each with one session kept running (a publisher waiting for its
approval) that must stay subscribed until it ends too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from redis.asyncio import Redis

from baton.bus.base import Bus
from baton.bus.events import ApprovalRequested
from baton.bus.memory import MemoryBus
from baton.bus.redis import RedisBus
from baton.session import Session, SessionConfig
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.server.helpers import client, read_all, serving, start_session
from tests.support.events import wait_for_event
from tests.support.polling import until

FINISHED = 4


async def subscribed(bus: Bus, session: str) -> set[str]:
    """The wake-up channels of ``session`` this process is subscribed to: what Redis reports
    (``PUBSUB CHANNELS``), or what the memory bus watches; each as ``<agent>`` or ``events``."""
    if isinstance(bus, RedisBus):
        async with Redis.from_url(bus.url, decode_responses=True) as admin:
            channels = await admin.pubsub_channels(f"*{{{session}}}*")
            counts = dict(await admin.pubsub_numsub(*channels)) if channels else {}
        assert all(n == 1 for n in counts.values()), counts  # one process, one subscription
        return {_tail(str(name)) for name in channels}
    assert isinstance(bus, MemoryBus)
    return {c.split("\x00")[1] for c in bus._broker.hub.channels() if c.startswith(session)}


def _tail(channel: str) -> str:
    """``<prefix>:{S}:wake:<agent>`` → ``<agent>``; ``<prefix>:{S}:events`` → ``events``."""
    rest = channel.split("}:", 1)[1]
    return rest.removeprefix("wake:")


def no_subscription(bus: Bus, session: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await subscribed(bus, session) == set()

    return check


def config(bus: Bus, task: str, **fields: object) -> SessionConfig:
    prefix = bus.keys.prefix if isinstance(bus, RedisBus) else "baton"
    return SessionConfig.model_validate(
        {"task": task, "bus_url": bus.url, "bus_prefix": prefix, **fields}
    )


async def test_finished_sessions_leave_no_subscription_and_a_running_one_keeps_its_own(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus:
        waiting = Session(config(bus, "publish a haiku", approve="ask"), bus=bus)
        async with waiting:
            waiting.start()
            asked = await wait_for_event(bus, waiting.id, ApprovalRequested)

            async def waits_subscribed() -> bool:  # the publisher reads its approvals next
                return {"lead", "publisher.approvals"} <= await subscribed(bus, waiting.id)

            await until(waits_subscribed, "the waiting session's subscriptions")
            finished: list[str] = []
            for n in range(FINISHED):
                async with Session(config(bus, f"paint fox {n}", approve="auto"), bus=bus) as one:
                    assert (await one.run()).status == "completed"
                    assert await subscribed(bus, one.id) == set()  # as soon as it ended
                finished.append(one.id)
            for session in finished:
                assert await subscribed(bus, session) == set()
            assert {"lead", "publisher.approvals"} <= await subscribed(bus, waiting.id)
            assert asked.agent == "publisher"
            await waiting.answer(asked.calls[0].call_id, approved=True)
            assert (await waiting.run()).status == "completed"
            assert await subscribed(bus, waiting.id) == set()


async def test_a_cancelled_session_leaves_no_subscription(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        async with Session(config(bus, "publish a haiku", approve="ask"), bus=bus) as session:
            session.start()
            await wait_for_event(bus, session.id, ApprovalRequested)
            session.cancel()
            assert (await session.run()).status == "cancelled"
            assert await subscribed(bus, session.id) == set()


async def test_baton_serve_keeps_subscriptions_only_for_the_sessions_it_runs(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    bus = RedisBus(redis_server.url, prefix="unsub-serve")
    async with bus, serving(bus, tmp_path) as server, client(server) as http:
        with anyio.fail_after(90):
            waiting = await start_session(http, "publish a haiku", profiles=["publisher"])
            asked = await wait_for_event(bus, waiting, ApprovalRequested)

            async def waits_subscribed() -> bool:
                return {"lead", "publisher.approvals"} <= await subscribed(bus, waiting)

            await until(waits_subscribed, "the waiting session's subscriptions")
            finished = [
                await start_session(http, f"paint heron {n}", profiles=["painter"])
                for n in range(FINISHED)
            ]
            for session in finished:
                assert (await read_all(http, session))[-1].json()["status"] == "completed"
                # Released before its end is logged: an SSE client seeing the end sees them gone.
                assert not {"lead", "painter", "painter.approvals"} & await subscribed(bus, session)
            for session in finished:  # the server's feed of the stream lets go as it closes
                await until(no_subscription(bus, session), f"{session} unsubscribed")
            assert {"lead", "publisher.approvals"} <= await subscribed(bus, waiting)
            call_id = asked.calls[0].call_id
            decided = await http.post(
                f"/sessions/{waiting}/approvals/{call_id}", json={"approved": True}
            )
            assert decided.status_code == 200, decided.text
            assert (await read_all(http, waiting))[-1].json()["status"] == "completed"
            await until(no_subscription(bus, waiting), f"{waiting} unsubscribed")


async def test_many_inboxes_forgotten_at_once_leave_only_the_others_subscribed(
    make_bus: BusFactory,
) -> None:
    """A stopping worker stops watching all its idle agents' inboxes in one step
    (``forget_all``: one UNSUBSCRIBE for all of them); only those are let go."""
    async with make_bus() as bus:
        agents = [f"a{n}" for n in range(30)]
        for agent in agents:
            assert await bus.inboxes.read("forgetful", agent) == []  # now watched
        assert await subscribed(bus, "forgetful") == set(agents)
        await bus.inboxes.forget_all([("forgetful", agent) for agent in agents[:25]])
        assert await subscribed(bus, "forgetful") == set(agents[25:])

"""A lead rides out a bus blip as its sub-agents do: Redis dies while the lead is about to read
its inbox, write (a hand-over) or log its text, comes back, and the session finishes as if nothing
happened; a lead cancelled while Redis stays away stops instead of retrying for ever."""

from __future__ import annotations

import anyio

from baton.bus.base import Bus
from baton.bus.events import AgentSpawned, Event, TextDelta, ToolResulted
from baton.bus.messages import Envelope
from baton.bus.payloads import ResultReport
from baton.bus.redis import RedisBus
from baton.lead.agent import Lead, LeadOutcome
from baton.lead.stream import EventFanout, EventRouter
from baton.llm.script import Reply
from baton.testing import RedisServer
from tests.lead.scenario import claimed, make_lead
from tests.support.models import call, scripted
from tests.support.outages import outage_when_logged, redis_outage, retry_logged

SESSION = "s-blip"


def delegating_lead(bus: Bus) -> tuple[Lead, anyio.Event]:
    """A lead whose model hands one painting to a painter and then says so, with an event set
    once the painter is spawned (the lead then waits on its inbox for the result)."""
    _, model = scripted(
        [
            call("send_message", to="painter", content="paint a heron", type="task"),
            Reply(text="The painter is on it."),
        ],
        fallback=False,
    )
    spawned = anyio.Event()

    async def on_event(event: Event) -> None:
        if isinstance(event, AgentSpawned):
            spawned.set()

    lead = make_lead(
        bus,
        model,
        session=SESSION,
        profiles={"painter": "Paints."},
        events=on_event,
        shutdown_grace_s=0.2,
    )
    return lead, spawned


async def test_lead_rides_out_a_redis_restart_while_waiting_for_results(
    redis_server: RedisServer,
) -> None:
    _, model = scripted(
        [
            call("send_message", to="painter", content="paint a heron", type="task"),
            Reply(text="The painter is on it."),
            Reply(text="Here is the heron."),
        ],
        fallback=False,
    )

    async with RedisBus(redis_server.url, prefix="lead-blip") as bus:
        # As after the lead's first wait, its inbox is watched: the read after the kill goes
        # straight to Redis (a first read would wait up to 30 s for its SUBSCRIBE to be confirmed).
        assert await bus.inboxes.read(SESSION, "lead") == []
        # No Redis from the spawn on: the lead's next bus call is its inbox read.
        with redis_outage(redis_server) as outage, retry_logged("read lead") as read_failed:

            async def on_event(event: Event) -> None:
                if isinstance(event, AgentSpawned):
                    outage.begin()

            lead = make_lead(
                bus, model, session=SESSION, profiles={"painter": "Paints."}, events=on_event
            )
            outcomes: list[LeadOutcome] = []

            async def run() -> None:
                outcomes.append(await lead.run("paint a heron"))

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                with anyio.fail_after(30):
                    await read_failed.wait()  # past the bus's own retries: before, the lead failed
                outage.end()
                result = Envelope(
                    session=SESSION,
                    sender="painter",
                    recipient="lead",
                    type="result",
                    content="a heron, painted",
                    meta=ResultReport(reason="finished", steps=1).to_meta(),
                )
                await claimed(bus, "painter", SESSION)
                await bus.inboxes.send(result)
    [outcome] = outcomes
    assert (outcome.status, outcome.answer) == ("completed", "Here is the heron.")
    assert lead.roster.agents["painter"].state == "done"
    assert any("a heron, painted" in str(m.get("content")) for m in lead.history)


def final_result(sender: str, reply_to: str, content: str) -> Envelope:
    return Envelope(
        session=SESSION,
        sender=sender,
        recipient="lead",
        type="result",
        content=content,
        reply_to=reply_to,
        meta=ResultReport(reason="finished", steps=1).to_meta(),
    )


async def test_a_hand_over_rides_out_a_redis_restart(redis_server: RedisServer) -> None:
    """The painter finished without reading the lead's second message; Redis dies right as the
    lead hands it to a fresh painter. Before, the failed send escaped the inbox read and failed
    the lead; now the hand-over waits for Redis and the session completes."""
    _, model = scripted(
        [
            call("send_message", to="painter", content="paint a heron", type="task"),
            call("send_message", "c2", to="painter", content="make it blue", type="message"),
            Reply(text="The painter is on it."),
            Reply(text="Here is the blue heron."),
        ],
        fallback=False,
    )
    both_sent, successor_spawned = anyio.Event(), anyio.Event()
    tool_results = 0

    async def on_event(event: Event) -> None:
        nonlocal tool_results
        if isinstance(event, ToolResulted):
            tool_results += 1
            if tool_results == 2:
                both_sent.set()
        if isinstance(event, AgentSpawned) and event.agent == "painter-2":
            successor_spawned.set()

    async with RedisBus(redis_server.url, prefix="lead-handover") as bus:
        profiles = {"painter": "Paints."}
        lead = make_lead(bus, model, session=SESSION, profiles=profiles, events=on_event)
        outcomes: list[LeadOutcome] = []

        async def run() -> None:
            outcomes.append(await lead.run("paint a blue heron"))

        with (
            redis_outage(redis_server) as outage,
            outage_when_logged(outage, "baton.lead.intake", f"session {SESSION}: painter left"),
            retry_logged(f"{SESSION}: send painter-2") as send_failed,
        ):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                with anyio.fail_after(30):
                    await both_sent.wait()
                    first = lead.roster.agents["painter"].sent[0]
                    await claimed(bus, "painter", SESSION)
                    await bus.inboxes.send(final_result("painter", first.id, "a heron, painted"))
                    await send_failed.wait()  # the hand-over met the outage and is retrying
                    outage.end()
                    await successor_spawned.wait()
                handed = lead.roster.agents["painter-2"].sent
                assert [m.content for m in handed] == ["make it blue"]
                await claimed(bus, "painter-2", SESSION)
                await bus.inboxes.send(final_result("painter-2", handed[0].id, "now blue"))
    [outcome] = outcomes
    assert (outcome.status, outcome.answer) == ("completed", "Here is the blue heron.")
    assert lead.roster.agents["painter-2"].state == "done"


async def test_a_cancel_during_an_outage_ends_the_lead(redis_server: RedisServer) -> None:
    """A shutdown from outside arrives, then Redis dies before the lead acks it: the ack (and the
    shutdown to the painter) give up once the lead is cancelled, instead of retrying for ever."""
    async with RedisBus(redis_server.url, prefix="lead-cancel") as bus:
        lead, waiting = delegating_lead(bus)
        outcomes: list[LeadOutcome] = []

        async def run() -> None:
            outcomes.append(await lead.run("paint a heron"))

        with (
            redis_outage(redis_server) as outage,
            outage_when_logged(
                outage, "baton.lead.intake", f"session {SESSION}: shutdown requested"
            ),
        ):
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(run)
                    await waiting.wait()
                    shutdown = Envelope(
                        session=SESSION, sender="user", recipient="lead", type="shutdown"
                    )
                    await bus.inboxes.send(shutdown)
            assert outage.active  # the ack really met the outage
    [outcome] = outcomes
    assert outcome.status == "cancelled"
    assert lead.roster.agents["painter"].state == "stopping"


async def test_text_flushed_during_an_outage_reaches_the_log(redis_server: RedisServer) -> None:
    """Before, the flusher's failed write ended the session's task group; now it waits it out."""
    async with RedisBus(redis_server.url, prefix="lead-flush") as bus:
        router = EventRouter(bus, EventFanout(), flush_s=0.01)
        delta = TextDelta(session=SESSION, agent="lead", text="hello through the blip")
        with redis_outage(redis_server) as outage, retry_logged("log text.delta") as failed:
            async with anyio.create_task_group() as group:
                await group.start(router.run_flusher)
                outage.begin()
                await router.emit(delta)  # buffered: the flusher writes it
                with anyio.fail_after(30):
                    await failed.wait()
                    outage.end()
                    logged: list[str] = []
                    async for entry in bus.log.tail(SESSION):
                        if isinstance(entry.event, TextDelta):
                            logged.append(entry.event.text)
                            break
                group.cancel_scope.cancel()
        assert logged == [delta.text]


async def test_a_lead_cancelled_during_an_outage_re_raises_the_cancellation(
    redis_server: RedisServer,
) -> None:
    """Before, the shielded shutdown's failed send replaced the cancellation with BusUnreachable."""
    async with RedisBus(redis_server.url, prefix="lead-cancelled") as bus:
        lead, spawned = delegating_lead(bus)
        ended: list[str] = []

        async def run() -> None:
            try:
                await lead.run("paint a heron")
            except anyio.get_cancelled_exc_class():
                ended.append("cancelled")
                raise

        with redis_outage(redis_server) as outage:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(run)
                    await spawned.wait()
                    outage.begin()
                    group.cancel_scope.cancel()
    assert ended == ["cancelled"]
    assert lead.cancelled and lead.roster.agents["painter"].state == "stopping"

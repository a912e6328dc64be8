"""The one inbox reader, on both backends: dedupe, ack, typed payloads, waits, and (on Redis)
riding out a server restart."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from baton.bus.base import Bus, BusOptions
from baton.bus.errors import BusUnreachable, InvalidEnvelope
from baton.bus.events import ErrorEvent
from baton.bus.inbox import InboxReader
from baton.bus.messages import Envelope, make_envelope
from baton.bus.payloads import ApprovalAnswer, ResultReport, approval_answer, result_report
from baton.bus.redis import RedisBus
from baton.testing import RedisServer
from tests.conftest import BusFactory
from tests.support.outages import outage_when_logged, redis_outage, retry_logged

S = "s-inbox"


def task(content: str) -> Envelope:
    return make_envelope(session=S, sender="lead", recipient="a", type="task", content=content)


def envelope(type: str, meta: dict[str, Any], to: str = "a") -> Envelope:
    return make_envelope(session=S, sender="painter", recipient=to, type=type, meta=meta)


async def handed_back(bus: Bus, heir: Bus, agent: str = "a") -> list[str]:
    """What ``bus`` holds un-acked in the inbox, as another consumer sees it once handed back."""
    await bus.inboxes.hand_back(S, agent)
    return [e.content for e in await heir.inboxes.read(S, agent)]


async def test_each_message_is_handed_out_once_and_acks_stick(make_bus: BusFactory) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        sent = [task("one"), task("two")]
        for message in sent:
            await bus.inboxes.send(message)
        reader = InboxReader(bus, S, "a")
        assert await reader.read() == sent
        assert list(reader.pending) == [e.id for e in sent]
        await bus.inboxes.send(sent[0])  # a retried send stores a duplicate of a pending message
        assert await reader.read() == []  # ...which is not handed out a second time
        await reader.ack([sent[0].id])
        assert list(reader.pending) == [sent[1].id] and reader.done == {sent[0].id}
        assert await handed_back(bus, heir) == ["two"]  # "one" and its duplicate are gone


async def test_a_redelivery_of_a_done_id_is_acked_not_handed_out(make_bus: BusFactory) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        done, new = task("done before a crash"), task("new")
        await bus.inboxes.send(done)
        await bus.inboxes.send(new)
        reader = InboxReader(bus, S, "a")
        reader.remember([done.id])  # as a resumed sub-agent does from its checkpoint
        assert await reader.read() == [new]
        assert await handed_back(bus, heir) == ["new"]  # the done one was acked on the way


async def test_ack_pending_acks_everything_handed_out(make_bus: BusFactory) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        for content in ("x", "y"):
            await bus.inboxes.send(task(content))
        reader = InboxReader(bus, S, "a")
        assert len(await reader.read()) == 2
        await reader.ack_pending()
        assert reader.pending == {}
        assert await handed_back(bus, heir) == []


async def test_payloads_that_misfit_their_type_go_to_the_dead_letters(
    make_bus: BusFactory,
) -> None:
    async with make_bus(lease_s=60) as bus, make_bus(lease_s=60) as heir:
        good_answer = envelope("approval", {"call_id": "c1", "approved": True, "extra": 1})
        good_result = envelope("result", {})  # every key has a default
        hostile = [
            envelope("approval", {"call_id": "c1", "approved": "yes"}),
            envelope("approval", {"approved": True}),
            envelope("result", {"final": "no"}),
            envelope("result", {"steps": -1}),
        ]
        for message in [hostile[0], good_answer, *hostile[1:], good_result]:
            await bus.inboxes.send(message)
        reader = InboxReader(bus, S, "a")
        assert await reader.read() == [good_answer, good_result]
        assert approval_answer(good_answer) == ApprovalAnswer(call_id="c1", approved=True)
        assert result_report(good_result) == ResultReport(final=True, reason="", steps=0)
        letters = await bus.letters.recent()
        assert [letter.reason for letter in letters] == [
            "invalid approval payload in meta: approved: Input should be a valid boolean",
            "invalid approval payload in meta: call_id: Field required",
            "invalid result payload in meta: final: Input should be a valid boolean",
            "invalid result payload in meta: steps: Input should be greater than or equal to 0",
        ]
        assert [Envelope.model_validate_json(letter.raw).id for letter in letters] == [
            e.id for e in hostile
        ]
        assert all(letter.source == f"inbox:{S}/a" for letter in letters)
        errors = [e.event async for e in bus.log.tail(S, follow=False)]
        assert len([e for e in errors if isinstance(e, ErrorEvent)]) == len(hostile)
        await reader.ack_pending()
        assert await handed_back(bus, heir) == []  # the hostile ones were acked too


def test_payload_parsers_refuse_with_a_reason() -> None:
    with pytest.raises(InvalidEnvelope, match="approval payload in meta: approved"):
        approval_answer(envelope("approval", {"call_id": "c", "approved": 1}))
    with pytest.raises(InvalidEnvelope, match="result payload in meta: reason"):
        result_report(envelope("result", {"reason": 7}))
    meta = ResultReport(reason="finished", steps=2).to_meta()
    assert meta == {"final": True, "reason": "finished", "steps": 2}  # the wire as before


async def test_collect_waits_until_take_has_enough(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        reader = InboxReader(bus, S, "a")
        got: list[str] = []
        reading = anyio.Event()

        async def take(fresh: list[Envelope]) -> bool:
            got.extend(e.content for e in fresh)
            reading.set()
            return len(got) >= 2

        async with anyio.create_task_group() as group:
            endings: list[str] = []

            async def run() -> None:
                endings.append(await reader.collect(take, slice_s=30))

            group.start_soon(run)
            with anyio.fail_after(10):
                await reading.wait()
                await bus.inboxes.send(task("first"))
                await bus.inboxes.send(task("second"))
        assert endings == ["taken"] and got == ["first", "second"]


async def test_collect_ends_at_the_deadline(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        reader = InboxReader(bus, S, "a")
        reads = 0

        async def take(fresh: list[Envelope]) -> bool:
            nonlocal reads
            reads += 1
            return False

        deadline = anyio.current_time() + 0.3
        with anyio.fail_after(10):
            assert await reader.collect(take, deadline=deadline, slice_s=0.1) == "timed_out"
        assert reads >= 2  # it read again after each slice


async def test_interrupt_ends_a_wait_at_once(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        reader = InboxReader(bus, S, "a")
        stopped = False
        waiting = anyio.Event()

        async def take(fresh: list[Envelope]) -> bool:
            waiting.set()  # called right before the wait starts
            return False

        endings: list[str] = []

        async def run() -> None:
            endings.append(await reader.collect(take, slice_s=None, stop=lambda: stopped))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await waiting.wait()
                stopped = True
                reader.interrupt()
        assert endings == ["interrupted"]


# -- riding out a Redis restart ----------------------------------------------------------------


async def test_collect_rides_out_a_redis_restart(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="inbox-restart") as bus:
        reader = InboxReader(bus, S, "a")
        got: list[Envelope] = []

        async def take(fresh: list[Envelope]) -> bool:
            got.extend(fresh)
            return bool(fresh)

        assert await reader.read() == []  # watching the inbox: later reads go straight to Redis
        endings: list[str] = []

        async def run() -> None:
            endings.append(await reader.collect(take))

        with redis_outage(redis_server) as outage, retry_logged("read a") as failed:
            outage.begin()
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                with anyio.fail_after(30):
                    await failed.wait()  # the read failed past the bus's own retries
                outage.end()
                sent = task("after the restart")
                await bus.inboxes.send(sent)
        assert endings == ["taken"] and got == [sent]


async def test_stop_during_an_outage_ends_the_retries(redis_server: RedisServer) -> None:
    async with RedisBus(redis_server.url, prefix="inbox-stop") as bus:
        reader = InboxReader(bus, S, "a")
        stopped = False

        async def take(fresh: list[Envelope]) -> bool:
            return False

        assert await reader.read() == []
        endings: list[str] = []

        async def run() -> None:
            endings.append(await reader.collect(take, stop=lambda: stopped))

        with redis_outage(redis_server) as outage, retry_logged("read a") as failed:
            outage.begin()
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(run)
                    await failed.wait()
                    stopped = True  # as Lead.cancel() and SubAgent.drain() do
                    reader.interrupt()
    assert endings == ["interrupted"]


async def test_a_fetch_is_never_lost_to_its_bookkeeping_failing(redis_server: RedisServer) -> None:
    """The fetch succeeded, then Redis died and the caller gave up on the dead letter and the
    settling ack: the fresh envelope is still handed out (the bus will not hand it out again)."""
    options = BusOptions(lease_s=60)
    async with (
        RedisBus(redis_server.url, options, prefix="inbox-sort") as bus,
        RedisBus(redis_server.url, options, prefix="inbox-sort") as heir,
    ):
        redelivered, misfit, good = (
            task("done before a crash"),
            envelope("approval", {"approved": True}),
            task("fresh"),
        )
        for message in (redelivered, misfit, good):
            await bus.inboxes.send(message)
        reader = InboxReader(bus, S, "a")
        reader.remember([redelivered.id])
        with (
            redis_outage(redis_server) as outage,
            outage_when_logged(outage, "baton.bus.parts.dead", "dead letter from"),
        ):
            with anyio.fail_after(30):
                fresh = await reader.read(give_up=lambda: outage.active)
            assert outage.active  # the bookkeeping really met the outage
        assert fresh == [good]
        assert list(reader.pending) == [good.id]
        assert await bus.letters.recent() == []  # not dead-lettered, and so...
        await reader.ack_pending()
        # ...left in the inbox for the next owner, with the redelivery whose ack failed
        assert sorted(await handed_back(bus, heir)) == sorted([redelivered.content, misfit.content])


async def test_an_ack_that_failed_is_retried_with_its_receipts(redis_server: RedisServer) -> None:
    """An ack that met an outage keeps what it needs: retried once Redis is back, it acks the
    entry (before, the first attempt had already forgotten the receipts, so the retry 'acked'
    nothing and the entry came back to the next owner as a duplicate)."""
    options = BusOptions(lease_s=60)
    async with (
        RedisBus(redis_server.url, options, prefix="inbox-ack") as bus,
        RedisBus(redis_server.url, options, prefix="inbox-ack") as heir,
    ):
        message = task("acked across an outage")
        await bus.inboxes.send(message)
        assert await bus.inboxes.read(S, "a") == [message]
        with redis_outage(redis_server) as outage:
            outage.begin()
            with pytest.raises(BusUnreachable), anyio.fail_after(60):
                await bus.inboxes.ack(S, "a", [message.id])
        with anyio.fail_after(30):
            await bus.inboxes.ack(S, "a", [message.id])
        assert await handed_back(bus, heir) == []

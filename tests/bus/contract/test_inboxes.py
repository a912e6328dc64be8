"""The ``Inboxes`` contract (:class:`baton.bus.parts.inboxes.Inboxes`), on the memory bus and on
real Redis: at-least-once delivery with wake-ups, deduplication, leases and hand-backs, and the
dead letters for what fails validation."""

from __future__ import annotations

import random

import anyio
import pytest

from baton.bus.errors import InvalidEnvelope
from baton.bus.events import ErrorEvent
from baton.bus.messages import Envelope, make_envelope
from tests.conftest import BusFactory


def task(session: str, to: str, content: str, **extra: object) -> Envelope:
    return make_envelope(
        session=session, sender="lead", recipient=to, type="task", content=content, **extra
    )


async def test_send_read_ack(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        sent = [
            task("s1", "painter", f"draw {i}", media_urls=["https://x.test/a.png"])
            for i in range(3)
        ]
        for envelope in sent:
            assert await bus.inboxes.send(envelope) == envelope.id
        got = await bus.inboxes.read("s1", "painter")
        assert got == sent  # same fields, same order, after a round trip through the wire format
        assert await bus.inboxes.read("s1", "painter") == []  # handed out once
        await bus.inboxes.ack("s1", "painter", [e.id for e in got])
        assert await bus.inboxes.read("s1", "painter") == []


async def test_wait_wakes_on_send(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.inboxes.read("s1", "a") == []
        woken: list[bool] = []

        async def waiter() -> None:
            woken.append(await bus.inboxes.wait("s1", "a", timeout=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await bus.inboxes.send(task("s1", "a", "hello"))
        assert woken == [True]
        assert [e.content for e in await bus.inboxes.read("s1", "a")] == ["hello"]


async def test_wait_times_out(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.inboxes.read("s1", "a") == []
        started = anyio.current_time()
        assert await bus.inboxes.wait("s1", "a", timeout=0.2) is False
        elapsed = anyio.current_time() - started
        assert 0.2 <= elapsed < 5


@pytest.mark.parametrize(
    "rounds", [200, pytest.param(2000, marks=pytest.mark.stress)], ids=lambda n: f"{n}-rounds"
)
async def test_no_lost_wakeup_between_read_and_wait(make_bus: BusFactory, rounds: int) -> None:
    """The race: a message lands after an empty read and before the wait, thousands of times
    (a developer's run: the first 200 of the same seeded rounds)."""
    async with make_bus() as bus:
        rng = random.Random(7)
        lost = 0
        for i in range(rounds):
            steps = rng.randrange(4)

            async def sender(n: int = i, k: int = steps) -> None:
                for _ in range(k):
                    await anyio.lowlevel.checkpoint()
                await bus.inboxes.send(task("race", "a", str(n)))

            got: list[Envelope] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(sender)
                got = await bus.inboxes.read("race", "a")
                if not got:
                    if not await bus.inboxes.wait("race", "a", timeout=2):
                        lost += 1
            got += await bus.inboxes.read("race", "a")
            assert [e.content for e in got] == [str(i)]
            await bus.inboxes.ack("race", "a", [e.id for e in got])
        assert lost == 0


class Parked:
    """A parked reader's callback: counts its calls, and lets a test wait for the first."""

    def __init__(self) -> None:
        self.calls = 0
        self.called = anyio.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.called.set()


async def test_a_parked_reader_is_called_once_by_a_send_and_never_after_it_is_taken_back(
    make_bus: BusFactory,
) -> None:
    async with make_bus() as bus, make_bus() as sender:

        async def parked_until_sent(content: str) -> Parked:
            """Park a reader after an empty read, send ``content``: the reader is called."""
            parked = Parked()
            bus.inboxes.park("s1", "a", parked)
            await sender.inboxes.send(task("s1", "a", content))
            with anyio.fail_after(10):
                await parked.called.wait()
            assert [e.content for e in await bus.inboxes.read("s1", "a")] == [content]
            return parked

        assert await bus.inboxes.read("s1", "a") == []
        first = await parked_until_sent("one")
        taken_back = Parked()
        unpark = bus.inboxes.park("s1", "a", taken_back)
        unpark()
        second = await parked_until_sent("two")
        assert (first.calls, taken_back.calls, second.calls) == (1, 0, 1)  # each park: once


async def test_a_send_between_the_read_and_the_park_is_not_lost(make_bus: BusFactory) -> None:
    async with make_bus() as bus, make_bus() as sender:
        assert await bus.inboxes.read("s1", "a") == []
        await sender.inboxes.send(task("s1", "a", "early"))
        await bus.inboxes.wait("s1", "a", timeout=10)  # the wake-up has reached this bus
        parked = Parked()
        bus.inboxes.park("s1", "a", parked)  # after it: called at once, not at the next send
        with anyio.fail_after(10):
            await parked.called.wait()
        assert [e.content for e in await bus.inboxes.read("s1", "a")] == ["early"]


async def test_closing_the_bus_calls_its_parked_readers(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.inboxes.read("s1", "a") == []
        parked = Parked()
        bus.inboxes.park("s1", "a", parked)
        await bus.aclose()
        with anyio.fail_after(10):
            await parked.called.wait()  # it reads again and learns the bus is closed


async def test_holding_says_which_inboxes_hold_a_message_read_or_not_until_it_is_acked(
    make_bus: BusFactory,
) -> None:
    """What a parked reader's minute look asks of many inboxes at once: a message counts from
    its send until its ack, whoever read it; inboxes of many sessions (many cluster slots) are
    answered in order."""
    async with make_bus() as bus:
        inboxes = [(f"s{i}", "painter") for i in range(12)]
        assert await bus.inboxes.holding([]) == []
        assert await bus.inboxes.holding(inboxes) == [False] * 12  # none exists yet
        for session, agent in inboxes[::3]:
            await bus.inboxes.send(task(session, agent, "draw"))
        assert await bus.inboxes.holding(inboxes) == [i % 3 == 0 for i in range(12)]
        [taken] = await bus.inboxes.read("s3", "painter")
        assert (await bus.inboxes.holding([("s3", "painter")])) == [True]  # read, not acked
        await bus.inboxes.ack("s3", "painter", [taken.id])
        assert (await bus.inboxes.holding([("s3", "painter"), ("s0", "painter")])) == [False, True]


async def test_redelivery_after_consumer_dies_deduped_by_id(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="alive") as alive,
        make_bus(lease_s=0.3, consumer="doomed") as doomed,
    ):
        sent = [task("s1", "a", f"job {i}") for i in range(3)]
        for envelope in sent:
            await alive.inboxes.send(envelope)
        assert await doomed.inboxes.read("s1", "a") == sent  # ... and it dies without acking
        assert await alive.inboxes.read("s1", "a") == []  # still under the dead consumer's lease
        got: list[Envelope] = []
        with anyio.fail_after(10):
            while len(got) < len(sent):
                got += await alive.inboxes.read("s1", "a")
                if len(got) < len(sent):
                    await alive.inboxes.wait("s1", "a", timeout=0.1)
        assert sorted(e.id for e in got) == sorted(e.id for e in sent)
        await alive.inboxes.ack("s1", "a", [e.id for e in got])
        assert await alive.inboxes.read("s1", "a") == []


async def test_duplicate_entry_handed_out_once(make_bus: BusFactory) -> None:
    """A retried send can store the same envelope twice; the reader sees it once."""
    async with make_bus() as bus:
        envelope = task("s1", "a", "once")
        await bus.inboxes.send_raw("s1", "a", envelope.to_json())
        await bus.inboxes.send_raw("s1", "a", envelope.to_json())
        assert await bus.inboxes.read("s1", "a") == [envelope]
        await bus.inboxes.ack("s1", "a", [envelope.id])
        await bus.inboxes.send_raw(
            "s1", "a", envelope.to_json()
        )  # arrives after its twin was acked
        assert await bus.inboxes.read("s1", "a") == []


MALFORMED = {
    "not JSON": ("{this is not json", "not valid JSON"),
    "wrong types": (
        '{"v":1,"session":"s1","sender":"lead","recipient":"a","type":"task","content":42}',
        "content",
    ),
    "unknown type": (
        '{"v":1,"session":"s1","sender":"lead","recipient":"a","type":"gossip"}',
        "type",
    ),
    "bad media scheme": (
        '{"v":1,"session":"s1","sender":"lead","recipient":"a","type":"task",'
        '"media_urls":["ftp://evil/x.png"]}',
        "scheme 'ftp'",
    ),
    "over the size limit": (
        '{"v":1,"session":"s1","sender":"lead","recipient":"a","type":"task","content":"'
        + "x" * 5000
        + '"}',
        "over the limit of 4096",
    ),
}


async def test_malformed_messages_go_to_dead_letters(make_bus: BusFactory) -> None:
    async with make_bus(max_message_bytes=4096) as bus:
        for raw, _ in MALFORMED.values():
            await bus.inboxes.send_raw("s1", "a", raw)
        good = task("s1", "a", "still here")
        await bus.inboxes.send(good)
        assert await bus.inboxes.read("s1", "a") == [good]  # the reader keeps going
        letters = await bus.letters.recent()
        assert len(letters) == len(MALFORMED)
        for letter, (name, (raw, reason)) in zip(letters, MALFORMED.items(), strict=True):
            assert reason in letter.reason, name
            assert letter.raw == raw[:65536] and letter.session == "s1"
        errors = [e.event async for e in bus.log.tail("s1", follow=False)]
        assert len(errors) == len(MALFORMED)
        assert all(isinstance(e, ErrorEvent) and "dead letters" in e.message for e in errors)
        assert await bus.inboxes.read("s1", "a") == []  # dead letters left the inbox


async def test_send_refuses_oversized_message(make_bus: BusFactory) -> None:
    async with make_bus(max_message_bytes=1024) as bus:
        with pytest.raises(InvalidEnvelope, match="over the limit of 1024"):
            await bus.inboxes.send(task("s1", "a", "x" * 2000))
        assert await bus.inboxes.read("s1", "a") == []


async def test_sessions_are_isolated(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.inboxes.send(task("one", "a", "for one"))
        await bus.inboxes.send(task("two", "a", "for two"))
        assert [e.content for e in await bus.inboxes.read("one", "a")] == ["for one"]
        assert [e.content for e in await bus.inboxes.read("two", "a")] == ["for two"]
        await bus.inboxes.send(task("two", "a", "again for two"))
        assert await bus.inboxes.wait("one", "a", timeout=0.2) is False
        assert await bus.inboxes.read("one", "a") == []


async def test_release_inbox_hands_unacked_messages_over_at_once(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=60, consumer="draining") as draining,
        make_bus(lease_s=60, consumer="resuming") as resuming,
    ):
        sent = [task("s1", "a", f"job {i}") for i in range(3)]
        for envelope in sent:
            await draining.inboxes.send(envelope)
        assert await draining.inboxes.read("s1", "a") == sent
        assert await resuming.inboxes.read("s1", "a") == []  # leased for a minute
        await draining.inboxes.hand_back("s1", "a")
        assert await resuming.inboxes.wait("s1", "a", timeout=10)  # the hand-back wakes the reader
        assert await resuming.inboxes.read("s1", "a") == sent  # no lease to wait out


async def test_many_inboxes_are_handed_back_together_whatever_each_holds(
    make_bus: BusFactory,
) -> None:
    """A stopping worker hands back all its idle agents' inboxes at once: the one holding our
    un-acked messages goes over to the next reader without a lease to wait out, an empty one
    and one never read (no consumer group on Redis) are simply done, and a deleted one too."""
    async with (
        make_bus(lease_s=60, consumer="draining") as draining,
        make_bus(lease_s=60, consumer="resuming") as resuming,
    ):
        held = [task("s1", "held", f"job {i}") for i in range(3)]
        for envelope in held:
            await draining.inboxes.send(envelope)
        assert await draining.inboxes.read("s1", "held") == held
        empty = task("s1", "empty", "done")
        await draining.inboxes.send(empty)
        assert await draining.inboxes.read("s1", "empty") == [empty]
        await draining.inboxes.ack("s1", "empty", [empty.id])
        await draining.inboxes.send(task("s1", "unread", "nobody read me"))
        inboxes = [("s1", "empty"), ("s1", "held"), ("s1", "never"), ("s1", "unread")]
        inboxes += [(f"s{n}", "idle") for n in range(2, 40)]  # most of a worker's: nothing held
        await draining.inboxes.hand_back_all(inboxes)
        assert await resuming.inboxes.read("s1", "held") == held  # no lease to wait out
        assert await resuming.inboxes.read("s1", "empty") == []
        (unread,) = await resuming.inboxes.read("s1", "unread")
        assert unread.content == "nobody read me"
        await draining.inboxes.forget_all(inboxes)
        await draining.inboxes.hand_back_all([])  # nothing asked: nothing done

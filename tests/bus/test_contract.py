"""One contract, both backends: every test here runs on the memory bus and on real Redis."""

from __future__ import annotations

import random
from contextlib import AsyncExitStack

import anyio
import pytest

from baton.bus.base import Bus, SpawnQueue
from baton.bus.connect import open_bus
from baton.bus.errors import BusClosed, ConfigError, InvalidEnvelope
from baton.bus.events import AgentProgress, ErrorEvent, SessionStarted
from baton.bus.messages import DEFAULT_POOL, Envelope, SpawnRequest, make_envelope
from tests.conftest import BusFactory

P = SpawnQueue.of_pool(DEFAULT_POOL, ["p"])
"""The default pool's queue for the profile these tests spawn."""


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
            assert await bus.send(envelope) == envelope.id
        got = await bus.read_inbox("s1", "painter")
        assert got == sent  # same fields, same order, after a round trip through the wire format
        assert await bus.read_inbox("s1", "painter") == []  # handed out once
        await bus.ack("s1", "painter", [e.id for e in got])
        assert await bus.read_inbox("s1", "painter") == []


async def test_wait_wakes_on_send(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.read_inbox("s1", "a") == []
        woken: list[bool] = []

        async def waiter() -> None:
            woken.append(await bus.wait("s1", "a", timeout=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await bus.send(task("s1", "a", "hello"))
        assert woken == [True]
        assert [e.content for e in await bus.read_inbox("s1", "a")] == ["hello"]


async def test_wait_times_out(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.read_inbox("s1", "a") == []
        started = anyio.current_time()
        assert await bus.wait("s1", "a", timeout=0.2) is False
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
                await bus.send(task("race", "a", str(n)))

            got: list[Envelope] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(sender)
                got = await bus.read_inbox("race", "a")
                if not got:
                    if not await bus.wait("race", "a", timeout=2):
                        lost += 1
            got += await bus.read_inbox("race", "a")
            assert [e.content for e in got] == [str(i)]
            await bus.ack("race", "a", [e.id for e in got])
        assert lost == 0


async def test_redelivery_after_consumer_dies_deduped_by_id(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="alive") as alive,
        make_bus(lease_s=0.3, consumer="doomed") as doomed,
    ):
        sent = [task("s1", "a", f"job {i}") for i in range(3)]
        for envelope in sent:
            await alive.send(envelope)
        assert await doomed.read_inbox("s1", "a") == sent  # ... and it dies without acking
        assert await alive.read_inbox("s1", "a") == []  # still under the dead consumer's lease
        got: list[Envelope] = []
        with anyio.fail_after(10):
            while len(got) < len(sent):
                got += await alive.read_inbox("s1", "a")
                if len(got) < len(sent):
                    await alive.wait("s1", "a", timeout=0.1)
        assert sorted(e.id for e in got) == sorted(e.id for e in sent)
        await alive.ack("s1", "a", [e.id for e in got])
        assert await alive.read_inbox("s1", "a") == []


async def test_duplicate_entry_handed_out_once(make_bus: BusFactory) -> None:
    """A retried send can store the same envelope twice; the reader sees it once."""
    async with make_bus() as bus:
        envelope = task("s1", "a", "once")
        await bus.send_raw("s1", "a", envelope.to_json())
        await bus.send_raw("s1", "a", envelope.to_json())
        assert await bus.read_inbox("s1", "a") == [envelope]
        await bus.ack("s1", "a", [envelope.id])
        await bus.send_raw("s1", "a", envelope.to_json())  # arrives after its twin was acked
        assert await bus.read_inbox("s1", "a") == []


async def test_event_log_tail_resumes_from_cursor(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        for i in range(5):
            await bus.emit(AgentProgress(session="s1", agent="a", content=f"step {i}"))
        logged = [item async for item in bus.events("s1", follow=False)]
        assert [e.event.content for e in logged] == [f"step {i}" for i in range(5)]  # type: ignore[union-attr]
        resumed = [item async for item in bus.events("s1", after=logged[2].cursor, follow=False)]
        assert resumed == logged[3:]

        send, receive = anyio.create_memory_object_stream[str](10)

        async def tail() -> None:
            async with send:
                async for item in bus.events("s1", after=logged[-1].cursor):
                    await send.send(item.event.content)  # type: ignore[union-attr]

        async with receive, anyio.create_task_group() as tg:
            tg.start_soon(tail)
            for i in range(5, 8):
                await bus.emit(AgentProgress(session="s1", agent="a", content=f"step {i}"))
            with anyio.fail_after(10):
                assert [await receive.receive() for _ in range(3)] == ["step 5", "step 6", "step 7"]
            tg.cancel_scope.cancel()


async def test_event_log_lists_sessions(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.emit(SessionStarted(session="older", agent="lead", task="x"))
        await bus.emit(SessionStarted(session="newer", agent="lead", task="y"))
        sessions = await bus.sessions()
        assert sessions.index("newer") < sessions.index("older")


async def test_spawn_queue_each_request_to_exactly_one_worker(make_bus: BusFactory) -> None:
    async with AsyncExitStack() as stack:
        workers = [await stack.enter_async_context(make_bus(consumer=f"w{i}")) for i in range(5)]
        submitted = {
            await workers[0].submit_spawn(SpawnRequest(session="s1", agent=f"a{i}", profile="p")): i
            for i in range(60)
        }
        claims: dict[str, list[str]] = {}

        async def work(bus: Bus) -> None:
            while (claim := await bus.claim_spawn(P, timeout=0.5)) is not None:
                claims.setdefault(claim.request.agent, []).append(bus.consumer)
                await bus.ack_spawn([claim.receipt])
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            for bus in workers:
                tg.start_soon(work, bus)
        assert len(submitted) == 60
        assert sorted(claims) == sorted(f"a{i}" for i in range(60))
        assert all(len(owners) == 1 for owners in claims.values())
        assert len({o[0] for o in claims.values()}) > 1  # the work really was shared


async def test_spawn_claim_moves_on_when_lease_expires(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="dead") as dead,
        make_bus(lease_s=0.3, consumer="heir") as heir,
    ):
        await dead.submit_spawn(SpawnRequest(session="s1", agent="a", profile="p"))
        first = await dead.claim_spawn(P, timeout=5)
        assert first is not None
        assert await heir.claim_spawn(P, timeout=0) is None
        second = await heir.claim_spawn(P, timeout=10)
        assert second is not None and second.request == first.request


async def test_spawn_release_hands_over_at_once(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=60, consumer="leaving") as leaving,
        make_bus(lease_s=60, consumer="staying") as staying,
    ):
        await leaving.submit_spawn(SpawnRequest(session="s1", agent="a", profile="p"))
        claim = await leaving.claim_spawn(P, timeout=5)
        assert claim is not None
        await leaving.renew_spawn([claim.receipt])
        assert await staying.claim_spawn(P, timeout=0) is None
        await leaving.release_spawn([claim.receipt])
        taken = await staying.claim_spawn(P, timeout=5)
        assert taken is not None and taken.request.agent == "a"


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
            await bus.send_raw("s1", "a", raw)
        good = task("s1", "a", "still here")
        await bus.send(good)
        assert await bus.read_inbox("s1", "a") == [good]  # the reader keeps going
        letters = await bus.dead_letters()
        assert len(letters) == len(MALFORMED)
        for letter, (name, (raw, reason)) in zip(letters, MALFORMED.items(), strict=True):
            assert reason in letter.reason, name
            assert letter.raw == raw[:65536] and letter.session == "s1"
        errors = [e.event async for e in bus.events("s1", follow=False)]
        assert len(errors) == len(MALFORMED)
        assert all(isinstance(e, ErrorEvent) and "dead letters" in e.message for e in errors)
        assert await bus.read_inbox("s1", "a") == []  # dead letters left the inbox


async def test_send_refuses_oversized_message(make_bus: BusFactory) -> None:
    async with make_bus(max_message_bytes=1024) as bus:
        with pytest.raises(InvalidEnvelope, match="over the limit of 1024"):
            await bus.send(task("s1", "a", "x" * 2000))
        assert await bus.read_inbox("s1", "a") == []


async def test_sessions_are_isolated(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        await bus.send(task("one", "a", "for one"))
        await bus.send(task("two", "a", "for two"))
        assert [e.content for e in await bus.read_inbox("one", "a")] == ["for one"]
        assert [e.content for e in await bus.read_inbox("two", "a")] == ["for two"]
        await bus.send(task("two", "a", "again for two"))
        assert await bus.wait("one", "a", timeout=0.2) is False
        assert await bus.read_inbox("one", "a") == []


async def test_agent_state_round_trip(make_bus: BusFactory) -> None:
    async with make_bus() as bus:
        assert await bus.get_agent_state("s1", "a") == {}
        await bus.set_agent_state("s1", "a", {"status": "running", "worker": "w1"})
        await bus.set_agent_state("s1", "a", {"status": "done"})
        assert await bus.get_agent_state("s1", "a") == {"status": "done", "worker": "w1"}


async def test_closed_bus_refuses_and_wakes_waiters(make_bus: BusFactory) -> None:
    bus = make_bus()
    outcome: list[BaseException] = []
    async with bus:
        assert await bus.read_inbox("s1", "a") == []

        async def waiter() -> None:
            try:
                await bus.wait("s1", "a", timeout=60)
            except BusClosed as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            await bus.aclose()
    assert len(outcome) == 1  # the waiter was released at once, with a clear error
    with pytest.raises(BusClosed, match="closed"):
        await bus.send(task("s1", "a", "too late"))


def test_open_bus_refuses_unknown_schemes() -> None:
    with pytest.raises(ConfigError, match="unknown bus URL 'kafka://x'"):
        open_bus("kafka://x")


async def test_renewal_never_takes_a_request_back(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=0.3, consumer="stalled") as stalled,
        make_bus(lease_s=0.3, consumer="heir") as heir,
    ):
        await stalled.submit_spawn(SpawnRequest(session="s1", agent="a", profile="p"))
        mine = await stalled.claim_spawn(P, timeout=5)
        assert mine is not None
        assert await stalled.renew_spawn([mine.receipt]) == [mine.receipt]
        taken = await heir.claim_spawn(P, timeout=10)  # the stalled worker's lease lapses
        assert taken is not None and taken.receipt == mine.receipt
        assert await stalled.renew_spawn([mine.receipt]) == []  # too late: it is the heir's
        assert await heir.renew_spawn([taken.receipt]) == [taken.receipt]


async def test_release_inbox_hands_unacked_messages_over_at_once(make_bus: BusFactory) -> None:
    async with (
        make_bus(lease_s=60, consumer="draining") as draining,
        make_bus(lease_s=60, consumer="resuming") as resuming,
    ):
        sent = [task("s1", "a", f"job {i}") for i in range(3)]
        for envelope in sent:
            await draining.send(envelope)
        assert await draining.read_inbox("s1", "a") == sent
        assert await resuming.read_inbox("s1", "a") == []  # leased for a minute
        await draining.release_inbox("s1", "a")
        assert await resuming.wait("s1", "a", timeout=10)  # the hand-back wakes the reader
        assert await resuming.read_inbox("s1", "a") == sent  # no lease to wait out

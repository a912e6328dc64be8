"""A byte that is not UTF-8, put on the bus by hand, is a malformed entry like any other.

Redis holds bytes, and ``redis-cli -x XADD`` puts any of them in a stream. Replies used to be
decoded strictly, so one ``\\xff`` raised ``UnicodeDecodeError`` out of the reader (neither a fault
nor an invalid envelope), failed every command sharing its pipelined round trip, and killed the
pub/sub reader. Each key kind a reader parses is poisoned here on a real Redis: an inbox (a
sub-agent's, the lead's and ``<agent>.approvals`` are all inboxes), the spawn queue, the event
log and the session list, and a wake-up channel; the processes that read them are in
``test_non_utf8_processes.py``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator

import anyio
import pytest
from redis.asyncio import Redis

from baton.bus.base import BusOptions, SpawnQueue
from baton.bus.events import ErrorEvent, RoundStarted, SessionStarted, ToolCallInfo
from baton.bus.messages import DEFAULT_POOL, Envelope, SpawnRequest, make_envelope
from baton.bus.redis import RedisBus
from baton.bus.redis.adapter import CommandPool
from baton.bus.redis.batch import CommandBatcher
from baton.engine import ApprovalQuestion
from baton.engine.bus_channel import BusInteractionChannel, answer_approval, approvals_inbox
from baton.testing import RedisServer
from tests.support.events import logged_events, wait_for_event

SESSION = "s-bytes"
BAD = b"\xff"
QUEUE = SpawnQueue.of_pool(DEFAULT_POOL, ["painter"])
_prefixes = itertools.count()


@pytest.fixture
def prefix() -> Iterator[str]:
    yield f"utf{next(_prefixes)}"


def task(to: str, content: str, session: str = SESSION) -> Envelope:
    return make_envelope(session=session, sender="lead", recipient=to, type="task", content=content)


def admin(server: RedisServer) -> Redis:
    """A client that writes and reads raw bytes, as a foreign producer would."""
    return Redis.from_url(server.url, decode_responses=False)


async def test_a_non_utf8_inbox_entry_is_dead_lettered_acked_and_the_rest_delivered(
    redis_server: RedisServer, prefix: str
) -> None:
    async with RedisBus(redis_server.url, prefix=prefix) as bus, admin(redis_server) as raw:
        key = bus.keys.inbox(SESSION, "painter")
        await raw.xadd(key, {b"msg": b'{"v":1,"content":"caf' + BAD + b'"}'})
        await raw.xadd(key, {BAD: b"x"})  # a field name that is not UTF-8 either
        good = task("painter", "paint a heron")
        await bus.inboxes.send(good)

        got = await bus.inboxes.read(SESSION, "painter")
        assert [e.id for e in got] == [good.id]
        await bus.inboxes.ack(SESSION, "painter", [good.id])

        assert await raw.xlen(key) == 0  # every entry left the inbox: none stuck
        assert (await raw.xpending(key, "agents"))["pending"] == 0
        second, first = await bus.letters.recent()  # the entry without a 'msg' field goes first
        assert first.reason == "not UTF-8: field 'msg' has byte 0xff at character 21"
        assert first.raw == '{"v":1,"content":"caf\\xff"}'  # the byte, shown as an escape
        assert first.source == key and first.session == SESSION
        assert "has no 'msg' field" in second.reason
        errors = [e for e in await logged_events(bus, SESSION) if isinstance(e, ErrorEvent)]
        assert len(errors) == 2 and "not UTF-8" in errors[1].message
        # The dead-letter stream itself stays UTF-8: anyone can list it.
        stored = await raw.xrange(bus.keys.dead)
        assert stored is not None and len(stored) == 2
        for _, fields in stored:
            assert fields is not None
            for value in fields.values():
                assert isinstance(value, bytes)
                value.decode()  # raises if it is not


async def test_commands_sharing_the_round_trip_with_a_bad_entry_are_unharmed(
    redis_server: RedisServer, prefix: str
) -> None:
    """One command connection: the reads of 30 inboxes (one of them poisoned) and 30 sends go
    out together in a few pipelines; every one succeeds."""
    options = BusOptions()
    async with (
        RedisBus(redis_server.url, options, prefix=prefix, command_connections=1) as bus,
        admin(redis_server) as raw,
    ):
        agents = [f"a{i}" for i in range(30)]
        for agent in agents:
            await bus.inboxes.send(task(agent, f"hello {agent}"))
        await raw.xadd(bus.keys.inbox(SESSION, "a7"), {b"msg": BAD})
        for agent in agents:  # subscribed beforehand: the reads below are one command each
            await bus.inboxes.read(SESSION, agent)
        for agent in agents:
            await bus.inboxes.send(task(agent, f"again {agent}"))
        await raw.xadd(bus.keys.inbox(SESSION, "a7"), {b"msg": BAD})
        got: dict[str, list[str]] = {}

        async def read(agent: str) -> None:
            got[agent] = [e.content for e in await bus.inboxes.read(SESSION, agent)]

        async with anyio.create_task_group() as tg:
            for agent in agents:
                tg.start_soon(read, agent)
                tg.start_soon(bus.inboxes.send, task("lead", f"from {agent}"))
        assert got == {agent: [f"again {agent}"] for agent in agents}
        assert len(await bus.inboxes.read(SESSION, "lead")) == len(agents)
        reasons = [letter.reason for letter in await bus.letters.recent()]
        assert reasons == ["not UTF-8: field 'msg' has byte 0xff at character 0"] * 2


async def test_an_op_that_cannot_be_packed_fails_alone_and_read_text_goes_back_as_its_bytes(
    redis_server: RedisServer, prefix: str
) -> None:
    pool = CommandPool(redis_server.url, connections=1, client_name="utf-batch")
    batcher = CommandBatcher(pool, connections=1)
    key = f"{prefix}:echo"
    try:
        async with anyio.create_task_group() as tg, admin(redis_server) as raw:
            await tg.start(batcher.run)
            await raw.set(key, b"caf" + BAD)
            [text] = await batcher.call(("GET", key))
            assert text == "caf\udcff"  # decoded, not raised
            outcomes: dict[str, object] = {}

            async def run(name: str, *command: object) -> None:
                try:
                    outcomes[name] = (await batcher.call(command))[0]  # type: ignore[arg-type]
                except TypeError as exc:
                    outcomes[name] = exc

            # The first goes out at once; the others queue behind it and share one pipeline.
            async with anyio.create_task_group() as ops:
                ops.start_soon(run, "ping", "PING")
                ops.start_soon(run, "write back", "SET", f"{key}:copy", text)
                ops.start_soon(run, "bad argument", "SET", f"{key}:none", None)
                ops.start_soon(run, "read", "GET", key)
            tg.cancel_scope.cancel()
            assert outcomes["ping"] == "PONG"
            assert outcomes["write back"] == "OK"
            assert isinstance(outcomes["bad argument"], TypeError)
            assert outcomes["read"] == "caf\udcff"
            assert await raw.get(f"{key}:copy") == b"caf" + BAD  # the original bytes
    finally:
        await batcher.aclose()
        await pool.aclose()


async def test_a_non_utf8_wake_up_does_not_stop_the_pubsub_reader(
    redis_server: RedisServer, prefix: str
) -> None:
    async with RedisBus(redis_server.url, prefix=prefix) as bus, admin(redis_server) as raw:
        assert await bus.inboxes.read(SESSION, "a") == []
        async with anyio.create_task_group() as tg:

            async def publish() -> None:
                await raw.publish(bus.keys.wake(SESSION, "a"), BAD)

            tg.start_soon(publish)
            assert await bus.inboxes.wait(SESSION, "a", timeout=10)  # woken, even by that
        # A read marks the wake-ups seen, so the next wait returns only on a new one: the
        # reader must still be there to deliver it.
        assert await bus.inboxes.read(SESSION, "a") == []
        good = task("a", "still here")
        async with anyio.create_task_group() as tg:
            tg.start_soon(bus.inboxes.send, good)
            assert await bus.inboxes.wait(SESSION, "a", timeout=10)  # the reader is alive
        assert [e.id for e in await bus.inboxes.read(SESSION, "a")] == [good.id]


async def test_a_non_utf8_spawn_request_is_dead_lettered_and_the_next_one_claimed(
    redis_server: RedisServer, prefix: str
) -> None:
    async with RedisBus(redis_server.url, prefix=prefix) as bus, admin(redis_server) as raw:
        first = SpawnRequest(session=SESSION, agent="a1", profile="painter")
        await bus.spawns.submit(first)
        claim = await bus.claims.claim(QUEUE, timeout=5)
        assert claim is not None and claim.request.id == first.id
        await bus.claims.ack([claim.receipt])
        key = bus.keys.spawn_stream(first)
        # What the report wrote with `printf '\377' | redis-cli -x XADD baton:spawn '*' req`.
        await raw.xadd(key, {b"req": BAD})
        second = SpawnRequest(session=SESSION, agent="a2", profile="painter")
        await bus.spawns.submit(second)
        claim = await bus.claims.claim(QUEUE, timeout=5)
        assert claim is not None and claim.request.id == second.id
        await bus.claims.ack([claim.receipt])
        [letter] = await bus.letters.recent()
        assert letter.reason == "not UTF-8: field 'req' has byte 0xff at character 0"
        assert letter.raw == "\\xff"
        assert await raw.xlen(key) == 0  # acked and gone: no other worker meets it again


async def test_a_bad_event_log_entry_is_skipped_and_dead_lettered_once(
    redis_server: RedisServer, prefix: str
) -> None:
    """Three readers (two 'processes' at once, then one again) meet two bad entries: each
    reader sees every good event, and each bad entry becomes exactly one dead letter."""
    async with (
        RedisBus(redis_server.url, prefix=prefix) as bus,
        RedisBus(redis_server.url, prefix=prefix) as other,
        admin(redis_server) as raw,
    ):
        key = bus.keys.events(SESSION)
        await bus.log.emit(SessionStarted(session=SESSION, agent="lead", task="paint"))
        await raw.xadd(key, {b"event": b'{"type":"text.delta","text":"' + BAD + b'"}'})
        await raw.xadd(key, {b"event": b'{"type":"no.such.event"}'})
        await bus.log.emit(RoundStarted(session=SESSION, agent="lead", round=1))
        seen: list[list[str]] = []

        async def read(reader: RedisBus) -> None:
            seen.append([e.type for e in await logged_events(reader, SESSION)])

        async with anyio.create_task_group() as tg:
            tg.start_soon(read, bus)
            tg.start_soon(read, other)
        await read(bus)
        assert seen == [["session.started", "round.started"]] * 3
        letters = await bus.letters.recent()
        reasons = [letter.reason for letter in letters]
        assert len(reasons) == 2
        assert reasons[0] == "not UTF-8: field 'event' has byte 0xff at character 29"
        assert reasons[1].startswith("malformed event: message: Input tag 'no.such.event'")
        assert "\n" not in reasons[1]  # one line
        assert {letter.source for letter in letters} == {key}
        assert await raw.xlen(key) == 2  # moved out of the log: no later reader meets them


async def test_a_session_name_that_is_not_utf8_is_left_out_of_the_list(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Set aside once: it used to be skipped with a warning on every listing, for ever."""
    async with RedisBus(redis_server.url, prefix=prefix) as bus, admin(redis_server) as raw:
        await bus.log.emit(SessionStarted(session=SESSION, agent="lead", task="paint"))
        await raw.zadd(bus.keys.sessions, {b"s-" + BAD: 1})
        for _ in range(3):
            assert await bus.log.sessions() == [SESSION]
        [letter] = await bus.letters.recent()
        assert letter.reason == "session name is not UTF-8 (byte 0xff at character 2)"
        assert letter.raw == "s-\\xff" and letter.source == bus.keys.sessions
        assert await raw.zrange(bus.keys.sessions, 0, -1) == [SESSION.encode()]
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings  # the dead letter's own line, once


async def test_a_non_utf8_approval_is_dead_lettered_and_the_real_answer_decides(
    redis_server: RedisServer, prefix: str
) -> None:
    async with RedisBus(redis_server.url, prefix=prefix) as bus, admin(redis_server) as raw:
        channel = BusInteractionChannel(bus, SESSION, "painter", emit_events=True)
        inbox = bus.keys.inbox(SESSION, approvals_inbox("painter"))
        await raw.xadd(inbox, {b"msg": b'{"call_id":"a","approved":true' + BAD + b"}"})
        calls = (ToolCallInfo(call_id="a", name="deploy", arguments="{}"),)
        question = ApprovalQuestion(id="q1", session=SESSION, agent="painter", calls=calls)
        decided: dict[str, bool] = {}

        async def ask() -> None:
            answered = await channel.ask_approval(question)
            decided.update({k: v.approved for k, v in answered.items()})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            error = await wait_for_event(bus, SESSION, ErrorEvent)
            assert "not UTF-8: field 'msg' has byte 0xff" in error.message
            assert not decided  # the poison decided nothing: still waiting
            await answer_approval(bus, SESSION, "a", False, reason="not today")
        assert decided == {"a": False}
        assert await raw.xlen(inbox) == 0  # the poison was acked with the answer
        [letter] = await bus.letters.recent()
        assert letter.source == inbox

"""The Redis bus on a real Redis Cluster, beyond the contract suite (which runs there too): where
each command goes, what a slot that moves or a master that dies does to sends and wake-ups."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
import redis

from baton.bus.messages import Envelope, make_envelope
from baton.bus.redis import RedisBus
from baton.bus.redis.adapter import Ask, Moved, RedisRefused, refusal
from baton.bus.redis.cluster import node_url, seed_addresses, sharded
from baton.bus.redis.scripts import APPEND_AND_WAKE, SPEND
from baton.bus.redis.slots import routing_key, slot_of
from baton.testing.redis_cluster import RedisCluster


def task(session: str, to: str, content: str) -> Envelope:
    return make_envelope(session=session, sender="lead", recipient=to, type="task", content=content)


# -- routing, without a server -------------------------------------------------------------------


def test_each_command_is_routed_by_its_key() -> None:
    inbox = "baton:{s1}:inbox:a"
    assert routing_key(("XADD", inbox, "*", "f", "v")) == inbox
    assert routing_key(("EVALSHA", "abc", 2, inbox, "baton:{s1}:agent:a", "x")) == inbox
    assert routing_key(("EVALSHA", "abc", 0, "x")) is None
    read = ("XREADGROUP", "GROUP", "agents", "me", "COUNT", 5, "STREAMS", inbox, ">")
    assert routing_key(read) == inbox
    assert routing_key(("XGROUP", "CREATE", inbox, "agents", "0", "MKSTREAM")) == inbox
    assert routing_key(("PING",)) is None
    assert routing_key(("SCRIPT", "LOAD", b"return 1")) is None
    # a session's keys share its hash tag, so one slot
    assert slot_of(inbox) == slot_of("baton:{s1}:events") != slot_of("baton:{s2}:events")


def test_wake_ups_are_sharded_on_a_cluster() -> None:
    assert sharded(("PUBLISH", "baton:{s1}:wake:a", "x")) == ("SPUBLISH", "baton:{s1}:wake:a", "x")
    call = APPEND_AND_WAKE.call("baton:{s1}:inbox:a", "f", "v", "baton:{s1}:wake:a", "", "")
    twin = sharded(call)
    assert twin[1] == APPEND_AND_WAKE.sharded.sha != APPEND_AND_WAKE.sha
    assert b"SPUBLISH" in APPEND_AND_WAKE.sharded.body
    assert sharded(APPEND_AND_WAKE.load())[2] == APPEND_AND_WAKE.sharded.body
    spend = SPEND.call("baton:{s1}:spend", 1)
    assert sharded(spend) == spend  # a script that wakes nobody has no twin


def test_redirects_are_read_from_the_reply() -> None:
    moved = refusal(redis.ResponseError("MOVED 3999 127.0.0.1:6381"))
    assert isinstance(moved, Moved)
    assert (moved.slot, moved.address) == (3999, ("127.0.0.1", 6381))
    ask = refusal(redis.ResponseError("ASK 12 10.0.0.2:7000"))
    assert isinstance(ask, Ask) and ask.address == ("10.0.0.2", 7000)
    odd = refusal(redis.ResponseError("MOVED nonsense"))
    assert type(odd) is RedisRefused and odd.code == "MOVED"


def test_cluster_urls_name_their_seeds_and_each_node_keeps_the_credentials() -> None:
    url = "rediss+cluster://baton:pw@h1:7000,h2,[::1]:7002/0?ssl_ca_certs=/ca.pem"
    assert seed_addresses(url) == [("h1", 7000), ("h2", 6379), ("::1", 7002)]
    assert node_url(url, ("h3", 7005)) == "rediss://baton:pw@h3:7005/0?ssl_ca_certs=/ca.pem"


# -- on a real cluster -------------------------------------------------------------------------


@pytest.fixture
def own_cluster() -> Iterator[RedisCluster]:
    """A cluster of this test's own: it is changed (a slot moved, a master killed)."""
    with RedisCluster() as cluster:
        yield cluster


async def test_keys_spread_over_the_masters_and_each_send_goes_to_one(
    redis_cluster: RedisCluster,
) -> None:
    async with RedisBus(redis_cluster.url, prefix="spread") as bus:
        for i in range(60):
            await bus.inboxes.send(task(f"s{i}", "a", str(i)))
        for i in range(60):
            got = await bus.inboxes.read(f"s{i}", "a")
            assert [e.content for e in got] == [str(i)]
    owners = {redis_cluster.owner(slot_of(f"spread:{{s{i}}}:inbox:a")).port for i in range(60)}
    assert len(owners) == 3  # every master holds some of them


async def test_wake_ups_of_many_slots_survive_dropped_connections(
    redis_cluster: RedisCluster,
) -> None:
    """Every wake-up connection killed: each is made again and re-subscribes its channels,
    which are of many slots (a shard channel command takes one slot's channels only: sent as
    one, they were refused, and their readers failed)."""
    sessions = [f"w{i}" for i in range(24)]
    async with RedisBus(redis_cluster.url, prefix="wake") as bus, anyio.create_task_group() as tg:
        woken: list[str] = []
        empty: list[str] = []
        all_empty = anyio.Event()

        async def reader(session: str) -> None:
            assert await bus.inboxes.read(session, "a") == []
            empty.append(session)
            if len(empty) == len(sessions):
                all_empty.set()
            if await bus.inboxes.wait(session, "a", timeout=20):
                woken.append(session)

        for session in sessions:
            tg.start_soon(reader, session)
        with anyio.fail_after(20):  # no "go" may be sent before a reader's first (empty) read
            await all_empty.wait()
        await bus.inboxes.read(sessions[-1], "a")  # every reader subscribed by now, or soon
        for node in redis_cluster.master_nodes():
            with redis_cluster.client(node) as admin:
                admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        await bus.probe(10)  # a wake-up round trip works again
        for session in sessions:
            await bus.inboxes.send(task(session, "a", "go"))
    assert sorted(woken) == sorted(sessions)


async def test_a_moved_slot_is_followed_by_sends_and_wake_ups(own_cluster: RedisCluster) -> None:
    key = "move:{s1}:inbox:a"
    slot = slot_of(key)
    async with RedisBus(own_cluster.url, prefix="move") as bus:
        await bus.inboxes.send(task("s1", "a", "before"))
        got = await bus.inboxes.read("s1", "a")
        await bus.inboxes.ack("s1", "a", [e.id for e in got])
        old = own_cluster.owner(slot)
        new = next(node for node in own_cluster.master_nodes() if node is not old)
        own_cluster.move_slot(slot, new)
        assert own_cluster.owner(slot) is new
        with anyio.fail_after(20):
            # the bus still has the old map: MOVED sends this on; the old master drops the
            # wake-up channel, and the reader is subscribed again on the new one
            await bus.inboxes.send(task("s1", "a", "after"))
            while not (got := await bus.inboxes.read("s1", "a")):
                await bus.inboxes.wait("s1", "a", timeout=1)
        assert [e.content for e in got] == ["after"]
        async with anyio.create_task_group() as tg:
            woken = anyio.Event()

            async def reader() -> None:
                if await bus.inboxes.wait("s1", "move-b", timeout=15):
                    woken.set()

            assert await bus.inboxes.read("s1", "move-b") == []
            tg.start_soon(reader)
            await bus.probe(5)
            await bus.inboxes.send(task("s1", "move-b", "wake"))
            with anyio.fail_after(15):
                await woken.wait()


async def test_a_master_killed_mid_traffic_loses_and_repeats_nothing(
    own_cluster: RedisCluster,
) -> None:
    """kill -9 of a master while messages flow to 30 sessions; its replica takes over. Every
    message arrives once (retried sends may write twice; readers drop repeats by id). Without
    ``WAIT`` for a replica, the last writes the master answered before it died were gone (7 of
    the first 30 here: replication is asynchronous)."""
    sessions = [f"f{i}" for i in range(30)]
    sent: dict[str, list[str]] = {s: [] for s in sessions}
    got: dict[str, list[str]] = {s: [] for s in sessions}
    async with (
        RedisBus(own_cluster.url, prefix="fail", attempts=12) as sender,
        RedisBus(own_cluster.url, prefix="fail", attempts=12) as receiver,
    ):

        async def send(round_: int) -> None:
            for session in sessions:
                content = f"{session}-{round_}"
                await sender.inboxes.send(task(session, "a", content))
                sent[session].append(content)

        async def drain(session: str) -> None:
            with anyio.fail_after(60):
                while len(got[session]) < len(sent[session]) or not sent[session]:
                    entries = await receiver.inboxes.read(session, "a")
                    got[session] += [e.content for e in entries]
                    await receiver.inboxes.ack(session, "a", [e.id for e in entries])
                    if not entries:
                        await receiver.inboxes.wait(session, "a", timeout=1)

        await send(0)
        own_cluster.kill_master(0)
        for round_ in range(1, 4):
            await send(round_)
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(drain, session)
    assert got == sent

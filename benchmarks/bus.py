"""Bus benchmark: wake-up latency on both backends, Redis throughput, idle-agent cost.

Run as ``python benchmarks/bus.py`` (starts its own redis-server the way the tests do) or with
``--redis-url`` to use a running one; ``--smoke`` runs tiny sizes in seconds, as CI does, to prove
it still works. ``--cluster`` adds the same figures on a Redis Cluster it starts (3 masters, a
replica each): wake latency against a PING to the inbox's master, msgs/s with the agents spread
over the masters, idle cost and connections per master, and how the work spreads (commands per
master for ``--sessions`` sessions; nodes and commands one send costs, nodes a session's emits
touch after its first). Prints one JSON object.
PING is measured in the same run as the floor the Redis wake-up latency is compared against.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import time
from contextlib import ExitStack
from typing import cast

import anyio
from redis.asyncio import Redis

from baton.bus.base import Bus, BusOptions
from baton.bus.events import AgentProgress
from baton.bus.memory import MemoryBus
from baton.bus.messages import Envelope, make_envelope
from baton.bus.redis import RedisBus
from baton.testing import RedisServer

# XREADGROUP's reply for one stream: [[stream, [[entry id, fields], ...]]].
StreamReply = list[tuple[str, list[tuple[str, dict[str, str]]]]]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def wake_latency_us(bus: Bus, n: int) -> list[float]:
    """Send → the waiting agent is woken and holds the message, one message at a time."""
    samples: list[float] = []
    for i in range(n):
        assert await bus.inboxes.read("wake", "a") == []
        sent_at = 0.0

        envelope = make_envelope(
            session="wake", sender="b", recipient="a", type="task", content=str(i)
        )

        async def send(envelope: Envelope = envelope) -> None:
            nonlocal sent_at
            await anyio.lowlevel.checkpoint()
            sent_at = time.perf_counter()
            await bus.inboxes.send(envelope)

        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            assert await bus.inboxes.wait("wake", "a", timeout=10)
            got = await bus.inboxes.read("wake", "a")
            samples.append((time.perf_counter() - sent_at) * 1e6)
        got += await bus.inboxes.read("wake", "a")
        await bus.inboxes.ack("wake", "a", [e.id for e in got])
    return samples[5:]  # drop warm-up


async def plain_loop_msgs_per_s(url: str, agents: int, per_agent: int) -> float:
    """The reference: a plain redis-py loop of XADD+PUBLISH / XREADGROUP / XACK, same load."""
    async with Redis.from_url(url, decode_responses=True) as client:
        for a in range(agents):
            await client.xgroup_create(f"plain:{a}", "g", id="0", mkstream=True)

        async def agent(a: int) -> None:
            for i in range(per_agent):
                await client.xadd(f"plain:{a}", {"msg": f"message {i}"})
                await client.publish(f"plain-wake:{a}", str(i))
                reply = await client.xreadgroup("g", "c", {f"plain:{a}": ">"}, count=100)
                got = cast(StreamReply, reply)  # RESP2 with decoded responses, one stream
                await client.xack(f"plain:{a}", "g", *[entry_id for entry_id, _ in got[0][1]])

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for a in range(agents):
                tg.start_soon(agent, a)
        return agents * per_agent / (time.perf_counter() - started)


async def raw_wake_floor_us(url: str, n: int) -> list[float]:
    """What the wake-up path costs Redis itself: XADD+PUBLISH, then XREADGROUP of that entry,
    back to back on one bare redis-py connection (no waiting, no validation)."""
    async with Redis.from_url(url, decode_responses=True) as client:
        await client.xgroup_create("floor", "g", id="0", mkstream=True)
        samples = []
        for i in range(n):
            started = time.perf_counter()
            entry_id = await client.xadd("floor", {"msg": f"m{i}"})
            await client.publish("floor-wake", entry_id)
            await client.xreadgroup("g", "c", {"floor": ">"}, count=100)
            samples.append((time.perf_counter() - started) * 1e6)
            await client.xack("floor", "g", entry_id)
    return samples[5:]


async def ping_us(url: str, n: int) -> list[float]:
    async with Redis.from_url(url) as client:
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            await client.ping()
            samples.append((time.perf_counter() - started) * 1e6)
    return samples[5:]


async def msgs_per_s(bus: Bus, agents: int, per_agent: int) -> float:
    """Each of ``agents`` loops send → read → ack on its own inbox, all concurrently."""

    async def agent(name: str) -> None:
        for i in range(per_agent):
            await bus.inboxes.send(
                make_envelope(session="tp", sender="x", recipient=name, type="task", content=str(i))
            )
            got = await bus.inboxes.read("tp", name)
            await bus.inboxes.ack("tp", name, [e.id for e in got])

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for a in range(agents):
            tg.start_soon(agent, f"a{a}")
    return agents * per_agent / (time.perf_counter() - started)


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def idle_agents(bus: Bus, url: str, n: int) -> tuple[float, int]:
    """``n`` agents each blocked in ``wait``: memory per agent and connections held."""
    gc.collect()
    before = rss_kib()
    ready = anyio.Event()
    count = 0

    async def agent(name: str) -> None:
        nonlocal count
        await bus.inboxes.read("idle", name)
        count += 1
        if count == n:
            ready.set()
        await bus.inboxes.wait("idle", name, timeout=600)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(agent, f"a{i}")
        await ready.wait()
        gc.collect()
        per_agent = (rss_kib() - before) / n
        async with Redis.from_url(url, decode_responses=True) as observer:
            clients = await observer.client_list()
        held = sum(1 for c in clients if c.get("name") == f"baton:{bus.consumer}")
        tg.cancel_scope.cancel()
    return per_agent, held


async def run(url: str, args: argparse.Namespace) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    async with MemoryBus() as memory:
        mem = await wake_latency_us(memory, args.samples)
    out["memory_wake_p50_us"] = round(statistics.median(mem), 1)
    out["memory_wake_p99_us"] = round(percentile(mem, 0.99), 1)
    pings = await ping_us(url, args.samples)
    out["redis_ping_p50_us"] = round(statistics.median(pings), 1)
    async with RedisBus(url, BusOptions(), prefix="bench-wake") as bus:
        red = await wake_latency_us(bus, args.samples)
    out["redis_wake_p50_us"] = round(statistics.median(red), 1)
    out["redis_wake_p99_us"] = round(percentile(red, 0.99), 1)
    out["redis_wake_over_ping"] = round(out["redis_wake_p50_us"] / out["redis_ping_p50_us"], 2)
    floor = await raw_wake_floor_us(url, args.samples)
    out["redis_raw_xadd_publish_xreadgroup_p50_us"] = round(statistics.median(floor), 1)
    async with RedisBus(url, BusOptions(), prefix="bench-tp") as bus:
        out["redis_msgs_per_s"] = round(await msgs_per_s(bus, 100, args.per_agent))
    async with RedisBus(url, BusOptions(), prefix="bench-emit") as bus:
        out["redis_emits_per_s"] = round(await emits_per_s(bus, 100, args.per_agent))
    out["redis_plain_loop_msgs_per_s"] = round(
        await plain_loop_msgs_per_s(url, 100, args.per_agent)
    )
    async with RedisBus(url, BusOptions(), prefix="bench-idle") as bus:
        kib, held = await idle_agents(bus, url, args.idle)
    out["idle_agents"] = args.idle
    out["idle_agent_kib"] = round(kib, 2)
    out["idle_redis_connections"] = held
    return out


async def emits_per_s(bus: Bus, sessions: int, per_session: int) -> float:
    """Events logged per second, ``sessions`` sessions each emitting ``per_session`` progress
    events one after another (an agent's every step is one)."""

    async def emitter(s: int) -> None:
        for i in range(per_session):
            await bus.log.emit(AgentProgress(session=f"ev{s}", agent="a", content=str(i)))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for s in range(sessions):
            tg.start_soon(emitter, s)
    return sessions * per_session / (time.perf_counter() - started)


async def spread_msgs_per_s(bus: Bus, agents: int, per_agent: int) -> float:
    """As :func:`msgs_per_s`, each agent in a session of its own (so, on a cluster, the agents'
    inboxes are spread over the masters)."""

    async def agent(a: int) -> None:
        session = f"tp{a}"
        for i in range(per_agent):
            await bus.inboxes.send(
                make_envelope(
                    session=session, sender="x", recipient="a", type="task", content=str(i)
                )
            )
            got = await bus.inboxes.read(session, "a")
            await bus.inboxes.ack(session, "a", [e.id for e in got])

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for a in range(agents):
            tg.start_soon(agent, a)
    return agents * per_agent / (time.perf_counter() - started)


async def commands_per_node(ports: list[int]) -> dict[int, int]:
    """Commands each node has run so far (``INFO commandstats``), for the deltas below."""
    calls: dict[int, int] = {}
    for port in ports:
        async with Redis(port=port, decode_responses=True) as client:
            stats = await client.info("commandstats")
        # this look's own connection (its HELLO, the CLIENT SETINFO redis-py sends on connecting,
        # and the INFO itself), and replication's heartbeats (a replica's REPLCONF ACK each
        # second lands on its master whatever baton does)
        ours = {
            "cmdstat_info",
            "cmdstat_hello",
            "cmdstat_client|setinfo",
            "cmdstat_replconf",
            "cmdstat_ping",
        }
        calls[port] = sum(int(v["calls"]) for k, v in stats.items() if k not in ours)
    return calls


async def cluster_figures(args: argparse.Namespace) -> dict[str, float | int]:
    """The same figures on a 3-master cluster (a replica each), plus how the work spreads:
    commands per master for ``--sessions`` sessions, and the nodes one send touches."""
    from baton.bus.redis.slots import slot_of
    from baton.testing.redis_cluster import RedisCluster

    out: dict[str, float | int] = {}
    with RedisCluster() as cluster:
        url = cluster.url
        masters = [node.port for node in cluster.master_nodes()]
        owner = cluster.owner(slot_of("bench-wake:{wake}:inbox:a")).port
        pings = await ping_us(f"redis://127.0.0.1:{owner}/0", args.samples)
        out["cluster_ping_owner_p50_us"] = round(statistics.median(pings), 1)
        async with RedisBus(url, BusOptions(), prefix="bench-wake") as bus:
            red = await wake_latency_us(bus, args.samples)
        out["cluster_wake_p50_us"] = round(statistics.median(red), 1)
        out["cluster_wake_p99_us"] = round(percentile(red, 0.99), 1)
        out["cluster_wake_over_ping"] = round(
            out["cluster_wake_p50_us"] / out["cluster_ping_owner_p50_us"], 2
        )
        async with RedisBus(url, BusOptions(), prefix="bench-tp") as bus:
            out["cluster_msgs_per_s"] = round(await spread_msgs_per_s(bus, 100, args.per_agent))
        async with RedisBus(url, BusOptions(), prefix="bench-emit") as bus:
            out["cluster_emits_per_s"] = round(await emits_per_s(bus, 100, args.per_agent))
        async with RedisBus(url, BusOptions(), prefix="bench-spread") as bus:
            await bus.inboxes.send(
                make_envelope(session="warm", sender="x", recipient="a", type="task", content="")
            )
            before = await commands_per_node(masters)
            for i in range(args.sessions):
                await bus.inboxes.send(
                    make_envelope(
                        session=f"s{i}", sender="x", recipient="a", type="task", content=""
                    )
                )
            after = await commands_per_node(masters)
            per_master = [after[port] - before[port] for port in masters]
            mean = sum(per_master) / len(per_master)
            out["cluster_sessions"] = args.sessions
            out["cluster_commands_per_master_max_dev_pct"] = round(
                max(abs(n - mean) for n in per_master) / mean * 100, 1
            )
            before = await commands_per_node(masters)
            for _ in range(20):
                await bus.inboxes.send(
                    make_envelope(session="one", sender="x", recipient="a", type="task", content="")
                )
            after = await commands_per_node(masters)
            out["cluster_nodes_touched_per_send"] = sum(
                1 for port in masters if after[port] - before[port] > 0
            )
            out["cluster_commands_per_send"] = round(
                sum(after[p] - before[p] for p in masters) / 20, 2
            )
            await bus.log.emit(AgentProgress(session="one", agent="a", content="first"))
            before = await commands_per_node(masters)
            for i in range(20):
                await bus.log.emit(AgentProgress(session="one", agent="a", content=str(i)))
            after = await commands_per_node(masters)
            out["cluster_nodes_touched_per_emit"] = sum(
                1 for port in masters if after[port] - before[port] > 0
            )
        async with RedisBus(url, BusOptions(), prefix="bench-idle") as bus:
            kib, held = await idle_agents(bus, f"redis://127.0.0.1:{masters[0]}/0", args.idle)
        out["cluster_idle_agent_kib"] = round(kib, 2)
        out["cluster_idle_connections_on_one_master"] = held
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--per-agent", type=int, default=50)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument(
        "--cluster", action="store_true", help="also on a 3-master Redis Cluster it starts"
    )
    parser.add_argument("--sessions", type=int, default=1000, help="--cluster: for the spread")
    args = parser.parse_args()
    if args.smoke:
        args.samples, args.per_agent, args.idle, args.sessions = 30, 5, 200, 60
    with ExitStack() as stack:
        url = args.redis_url or stack.enter_context(RedisServer(appendfsync="everysec")).url
        result = anyio.run(run, url, args)
    if args.cluster:
        result |= anyio.run(cluster_figures, args)
    print(json.dumps(result))
    check(result)


def check(result: dict[str, float | int]) -> None:
    """What must hold at any size: every figure measured, idle agents on a bounded pool."""
    timed = {key: value for key, value in result.items() if key != "idle_agent_kib"}  # RSS noise
    assert all(value > 0 for value in timed.values()), result
    # Waiting agents share the bus's connections (two for commands, one for pub/sub).
    assert result["idle_redis_connections"] <= 3, result
    if "cluster_wake_p50_us" in result:  # the same on each master; a send stays on one node
        assert result["cluster_idle_connections_on_one_master"] <= 3, result
        assert result["cluster_nodes_touched_per_send"] == 1, result


if __name__ == "__main__":
    main()

"""Benchmark of the sub-agent worker on Redis: fan-out, idle capacity, dispatch latency.

Prints one JSON object:

- ``fanout_1000_s``: 1,000 tasks to 1,000 sub-agents (spawn request + task message each) on one
  worker with the zero-latency offline model, time until all 1,000 results reached the lead;
- ``idle_subagents``: sub-agents then left waiting on their inboxes in the same worker process;
- ``idle_subagent_kib``: resident memory they added, per agent;
- ``redis_connections``: connections the worker process holds to Redis (from ``CLIENT LIST``,
  excluding this benchmark's measuring connection);
- ``dispatch_p50_ms`` / ``dispatch_p99_ms``: a message sent to one of the idle sub-agents → that
  agent's round starts (its loop's ``on_round`` hook), one at a time.

It starts its own ``redis-server`` unless ``--redis-url`` is given, or with ``--cluster`` a Redis
Cluster (3 masters, a replica each; ``redis_connections`` is then the busiest master's). The idle
agents are spread over 64 sessions, so on a cluster over the masters. The worker, the lead and the
measuring all live in this process, sharing one bus (two command connections and one pub/sub
connection, as a worker process would hold).

Run: ``.venv/bin/python benchmarks/subagents.py [--idle 10000] [--fanout 1000] [--samples 200]``;
``--smoke`` (200 idle, 50 fanned out, 20 samples) runs in seconds, as CI does, to prove it still
works.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio
import redis

from baton.bus.base import Bus, BusOptions
from baton.bus.connect import open_bus
from baton.bus.messages import Envelope, SpawnRequest
from baton.llm import offline_model
from baton.subagents.loop import AgentParts, SubAgent
from baton.subagents.profiles import AgentLimits, Profile
from baton.subagents.worker import Worker, WorkerLimits
from baton.testing import RedisServer
from baton.testing.redis_cluster import RedisCluster, RedisNodes

PREFIX = "bench"


def note(message: str, *args: object) -> None:
    """Progress on stderr, so a long run shows where it is."""
    print(message % args, file=sys.stderr, flush=True)


def rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def profile(idle_timeout_s: float) -> Profile:
    return Profile(
        name="answerer",
        description="Answers directly.",
        system_prompt="[baton:subagent] Answer briefly.",
        limits=AgentLimits(max_steps=2, idle_timeout_s=idle_timeout_s),
    )


async def until(condition: Callable[[], bool], every: float = 0.05, limit: float = 600) -> None:
    """Poll a condition the benchmark cannot be woken for (Redis's own counters)."""
    with anyio.fail_after(limit):
        while True:
            if condition():
                return
            await anyio.sleep(every)


class Timing:
    """Round-start times by agent name, filled by the loop's ``on_round`` hook."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.waiters: dict[str, anyio.Event] = {}

    def __call__(self, agent: SubAgent, batch: Sequence[Envelope]) -> None:
        self.started[agent.name] = time.perf_counter()
        waiter = self.waiters.pop(agent.name, None)
        if waiter is not None:
            waiter.set()


async def results_at_lead(bus: Bus, session: str, count: int, timeout: float) -> float:
    """Read the lead's inbox until ``count`` results; returns when the last one arrived."""
    got = 0
    with anyio.fail_after(timeout):
        while got < count:
            batch = await bus.inboxes.read(session, "lead", count=1000)
            got += sum(1 for m in batch if m.type == "result")
            if batch:
                await bus.inboxes.ack(session, "lead", [m.id for m in batch])
            elif got < count:
                await bus.inboxes.wait(session, "lead", 1.0)
    return time.perf_counter()


async def fanout(bus: Bus, n: int) -> float:
    session = "fanout"
    start = time.perf_counter()
    for i in range(n):
        await bus.inboxes.send(Envelope(session=session, sender="lead", recipient=f"f{i}",
                                        type="task", content=f"question {i}"))  # fmt: skip
        await bus.spawns.submit(SpawnRequest(session=session, agent=f"f{i}", profile="answerer"))
    end = await results_at_lead(bus, session, n, timeout=300)
    return end - start


IDLE_SESSIONS = 64
"""The idle agents are spread over this many sessions (on a cluster: over the masters)."""


def idle_session(i: int) -> str:
    return f"idle{i % IDLE_SESSIONS}"


async def idle(bus: Bus, worker: Worker, n: int, measure: RedisNodes) -> dict[str, Any]:
    await until(lambda: worker.hosted == 0)  # the fan-out agents are still acking their spawns
    gc.collect()
    before = rss_kib()
    base = 0
    for i in range(n):
        request = SpawnRequest(session=idle_session(i), agent=f"i{i}", profile="answerer")
        await bus.spawns.submit(request)
    # Every agent is idle once it has subscribed to its wake-up channel and sits in wait().
    pattern = f"{PREFIX}:{{idle*}}:wake:*"
    await until(
        lambda: worker.hosted >= base + n and measure.watched(pattern) >= n,
        every=0.2,
    )
    gc.collect()
    after = rss_kib()
    return {
        "idle_subagents": worker.hosted - base,
        "idle_subagent_kib": round((after - before) / n, 2),
        "redis_connections": measure.baton_connections(),
    }


async def dispatch(bus: Bus, timing: Timing, n_idle: int, samples: int) -> dict[str, float]:
    latencies = []
    for i in random.Random(7).sample(range(n_idle), samples):
        name, session = f"i{i}", idle_session(i)
        waiter = timing.waiters[name] = anyio.Event()
        sent = time.perf_counter()
        await bus.inboxes.send(Envelope(session=session, sender="lead", recipient=name, type="task",
                                content="ping"))  # fmt: skip
        with anyio.fail_after(30):
            await waiter.wait()
        latencies.append((timing.started[name] - sent) * 1000)
        await results_at_lead(bus, session, 1, timeout=30)  # measure on a quiet worker
    latencies.sort()
    return {
        "dispatch_p50_ms": round(statistics.median(latencies), 3),
        "dispatch_p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3),
        "dispatch_samples": len(latencies),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with ExitStack() as stack:
        url = args.redis_url
        if args.cluster:
            cluster = stack.enter_context(RedisCluster())
            url = cluster.url
            measure = RedisNodes.of_cluster(cluster)
        else:
            if url is None:  # as in production
                url = stack.enter_context(RedisServer(appendfsync="everysec")).url
            with redis.Redis.from_url(url) as flat:
                flat.flushdb()
            measure = RedisNodes.of_url(url)
        stack.callback(measure.close)
        media = Path(stack.enter_context(TemporaryDirectory()))
        timing = Timing()
        options = BusOptions(lease_s=60)
        async with open_bus(url, options, prefix=PREFIX) as bus, offline_model() as model:
            profiles = {"answerer": profile(idle_timeout_s=3600)}
            worker = Worker(
                bus,
                profiles,
                lambda p: model,
                parts=AgentParts(media_dir=media, on_round=timing),
                limits=WorkerLimits(concurrency=args.idle + args.fanout, claim_timeout_s=1.0),
            )
            async with worker:
                report: dict[str, Any] = {"fanout_1000_s": round(await fanout(bus, args.fanout), 3)}
                report["fanout_tasks"] = args.fanout
                note("fanout done: %s", report)
                report |= await idle(bus, worker, args.idle, measure)
                note("idle done: %s", report)
                report |= await dispatch(bus, timing, args.idle, args.samples)
                note("dispatch done; stopping")
                worker.give_back_now()
        return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", default=None)
    parser.add_argument(
        "--cluster", action="store_true", help="on a 3-master Redis Cluster it starts"
    )
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.idle, args.fanout, args.samples = 200, 50, 20
    result = anyio.run(main, args)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    assert result["idle_subagents"] == args.idle, result
    assert result["dispatch_samples"] == args.samples, result
    # One worker process holds a fixed pool however many agents it hosts (see the docstring).
    assert result["redis_connections"] <= 3, result

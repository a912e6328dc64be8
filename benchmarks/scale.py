"""Scale test: many idle sub-agents hosted across real ``baton worker`` processes, on a Redis
Cluster (or one node), and the cost of each: resident memory per idle sub-agent, and how long a
task sent to a random one of them takes to come back as its result.

It starts the cluster (``baton.testing.RedisCluster``: 3 masters, a replica each) unless
``--redis-url`` names a bus, then ``--workers`` worker processes of pool ``scale`` (the offline
model; a profile whose agents wait an hour for work), and submits ``--agents`` spawn requests
spread over ``--sessions`` sessions, without a task: each agent starts, finds its inbox empty and
waits. An agent counts as idle once its wake-up channel is subscribed (``PUBSUB SHARDCHANNELS``
on every master; ``PUBSUB CHANNELS`` on one node). Then ``--samples`` tasks, one at a time, each to
a random agent; this process reads the session's lead inbox for the result.

Prints one JSON object:

- ``idle_subagents``; ``idle_subagent_kib``: the workers' resident memory (``VmRSS``) added per
  agent, from before the spawns to all idle; ``worker_connections_max``: connections the busiest
  master holds from baton (named ``baton:...``: every worker's, and this benchmark's own bus);
- ``idle_cpu_pct``: the workers' CPU time (user + system, all of them, in % of one core) over
  ``--idle-window`` seconds (default 65: more than the minute after which every waiting agent
  looks at its inbox again, wake-up or not) once every agent is idle: what idle agents cost
  while nothing happens, and so what they take from the dispatch that comes next;
- ``dispatch_p50_ms`` / ``dispatch_p99_ms``: task sent → its result in the lead's inbox: the
  agent's whole round (the offline model, in-process through the real ``openai`` client: about
  0.6 ms of CPU a call; the round's events, checkpoint, ack and final report: some ten sequential
  writes on the worker);
- ``delivery_p50_ms`` / ``delivery_p99_ms``: task sent → the agent's first word in the lead's
  inbox (the progress message it sends once it has read the task, before its model is asked):
  the wake-up, the read and one write, which is what a sub-agent's work waits for whatever its
  model. This is the cross-process counterpart of ``benchmarks/subagents.py``'s
  ``dispatch`` (sent → the agent's round starts, seen in-process), and an upper bound of it:
  the first thing another process can see of an agent that got its task is its first word;
  ``spawn_s``: the spawns submitted → every agent idle;
- ``stop_s``: ``SIGTERM`` to every worker → the last one exited (each gives its agents back);
  ``stop_unreleased``: the spawn requests still held by a stopped worker then, which another
  worker can resume only once their leases lapse (the rest were handed back at once);
  ``stop_killed``: workers still running a minute after ``SIGTERM`` (then killed).

The issue's figure: ``--agents 100000 --workers 8`` on a quiet machine (targets: ≤ 10 KiB per idle
sub-agent, p99 ≤ 10 ms). ``--smoke``: 2 workers, 400 agents, 20 samples.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import anyio
import redis

from baton.bus.base import BusOptions
from baton.bus.connect import open_bus
from baton.bus.messages import Envelope, SpawnRequest
from baton.bus.redis.keys import SPAWN_GROUP
from baton.testing.redis_cluster import RedisCluster, RedisNodes

BATON = str(Path(sys.executable).parent / "baton")
PREFIX = "scale"
POOL = "scale"
PROFILES = """[profiles.idler]
description = "Waits for work, then answers."
system_prompt = "[baton:subagent] Answer briefly."
limits = { idle_timeout_s = 3600, max_steps = 2 }
"""


def note(message: str, *args: object) -> None:
    print("scale: " + message % args, file=sys.stderr, flush=True)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_workers(url: str, count: int, per_worker: int, tmp: Path) -> list[subprocess.Popen[str]]:
    profiles = tmp / "profiles.toml"
    profiles.write_text(PROFILES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BATON_"))}
    workers = []
    for _ in range(count):
        args = [BATON, "worker", "--bus", url, "--prefix", PREFIX, "--pool", POOL,
                "--profiles", str(profiles), "--concurrency", str(per_worker),
                "--media", str(tmp / "media"), "--log-level", "WARNING"]  # fmt: skip
        workers.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, text=True))
    return workers  # ready once each announced itself on the pool (run() waits for that)


def session_of(i: int, sessions: int) -> str:
    return f"sc{i % sessions}"


async def run(
    url: str, nodes: RedisNodes, args: argparse.Namespace, pids: list[int]
) -> dict[str, float]:
    out: dict[str, float] = {}
    async with open_bus(url, BusOptions(lease_s=60), prefix=PREFIX) as bus:
        deadline = time.monotonic() + 60
        while len(await bus.workers.live(POOL)) < len(pids):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not announce themselves within 60 s")
            await anyio.sleep(0.2)  # another process's state: polled
        before = sum(rss_kib(pid) for pid in pids)
        started = time.perf_counter()
        for i in range(args.agents):
            session = session_of(i, args.sessions)
            await bus.spawns.submit(
                SpawnRequest(session=session, agent=f"i{i}", profile="idler", pool=POOL)
            )
        pattern = f"{PREFIX}:{{sc*}}:wake:i*"
        deadline = time.monotonic() + args.timeout
        while (watched := nodes.watched(pattern)) < args.agents:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {watched} of {args.agents} agents idle after the timeout")
            await anyio.sleep(0.5)
        out["spawn_s"] = round(time.perf_counter() - started, 1)
        await anyio.sleep(1.0)  # the last agents' first allocations, before reading RSS
        after = sum(rss_kib(pid) for pid in pids)
        out["idle_subagents"] = args.agents
        out["idle_subagent_kib"] = round((after - before) / args.agents, 2)
        out["worker_connections_max"] = nodes.baton_connections()
        if args.idle_window > 0:
            cpu_before, idle_from = sum(cpu_s(pid) for pid in pids), time.perf_counter()
            await anyio.sleep(args.idle_window)  # the figure is what idling costs over a while
            spent = sum(cpu_s(pid) for pid in pids) - cpu_before
            out["idle_cpu_pct"] = round(100 * spent / (time.perf_counter() - idle_from), 1)
        latencies: list[float] = []
        deliveries: list[float] = []
        for i in random.Random(7).sample(range(args.agents), args.samples):
            session = session_of(i, args.sessions)
            sent = time.perf_counter()
            delivered = None
            await bus.inboxes.send(Envelope(session=session, sender="lead", recipient=f"i{i}",
                                            type="task", content="ping"))  # fmt: skip
            with anyio.fail_after(30):
                while True:
                    batch = await bus.inboxes.read(session, "lead")
                    if batch:
                        if delivered is None:  # the agent's progress, or its result, is first
                            delivered = time.perf_counter()
                        await bus.inboxes.ack(session, "lead", [m.id for m in batch])
                    if any(m.type == "result" for m in batch):
                        break
                    await bus.inboxes.wait(session, "lead", 1.0)
            latencies.append((time.perf_counter() - sent) * 1000)
            deliveries.append(((delivered or time.perf_counter()) - sent) * 1000)
        out["dispatch_p50_ms"], out["dispatch_p99_ms"] = p50_p99(latencies)
        out["delivery_p50_ms"], out["delivery_p99_ms"] = p50_p99(deliveries)
    return out


def stop_workers(workers: list[subprocess.Popen[str]]) -> tuple[float, int]:
    """``SIGTERM`` every worker: seconds until the last one exited, and how many were still
    running a minute later (then killed)."""
    started = time.perf_counter()
    for worker in workers:
        worker.terminate()
    killed = 0
    for worker in workers:
        try:
            worker.wait(max(0.0, started + 60 - time.perf_counter()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            killed += 1
    return round(time.perf_counter() - started, 1), killed


def unreleased(nodes: RedisNodes) -> int:
    """Spawn requests pending for a consumer that did not hand them back: a handed-back entry
    is claimed "idle for years" (``RELEASED_IDLE_MS``), so it is pending but idle a day or more."""
    stream, day_ms = f"{PREFIX}:spawn:{{{POOL}}}:idler", 24 * 3600 * 1000
    for client in nodes.clients:  # the pool's streams live on one node: the others say MOVED
        try:
            if not client.exists(stream):
                continue
        except redis.ResponseError:
            continue
        every = ("-", "+", 10**7)
        pending = client.xpending_range(stream, SPAWN_GROUP, *every)
        handed = client.xpending_range(stream, SPAWN_GROUP, *every, idle=day_ms)
        return len(pending) - len(handed)
    return 0


def p50_p99(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return round(statistics.median(ordered), 2), round(p99, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", help="use this bus instead of starting a cluster")
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for every spawn")
    parser.add_argument(
        "--idle-window", type=float, default=65.0, help="seconds of idle measured (0: none)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.agents, args.workers, args.sessions, args.samples = 400, 2, 40, 20
        args.idle_window = 1.0
    with ExitStack() as stack:
        url = args.redis_url
        if url is None:
            cluster = stack.enter_context(RedisCluster())
            url = cluster.url
            nodes = RedisNodes.of_cluster(cluster)
        else:
            nodes = RedisNodes.of_url(url)
        stack.callback(nodes.close)
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="baton-scale-")))
        per_worker = args.agents // args.workers + args.samples + 10
        workers = start_workers(url, args.workers, per_worker, tmp)

        def stop() -> None:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()

        stack.callback(stop)
        result = anyio.run(run, url, nodes, args, [w.pid for w in workers])
        result["stop_s"], result["stop_killed"] = stop_workers(workers)
        result["stop_unreleased"] = unreleased(nodes)
    result["workers"] = args.workers
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Benchmark of ``baton serve``'s event stream: latency, and many clients on one session.

Prints one JSON object:

- ``sse_event_latency_p50_ms`` / ``_p99_ms``: an event emitted on the bus (``bus.log.emit``) until
  an SSE client has parsed it from the HTTP stream, for one client (``--latency-events`` samples,
  one every 5 ms); target p99 ≤ 20 ms;
- ``sse_clients_held``: SSE clients connected to one session for the whole hold (``--hold``,
  60 s by default) that received every event emitted meanwhile (one a second); target 1,000;
- ``sse_fanout_latency_p50_ms`` / ``_p99_ms``: during the hold, emitted → received by each of
  the clients (every client's every event);
- ``sse_clients_connect_s``: how long it took all the clients to connect.

The server runs as ``baton serve`` in its own process on a Redis bus (a ``redis-server`` started
here, as the tests do); events are emitted into Redis from this process, and the clients read
them over HTTP in this process, so emit and receipt times share one clock. The path measured is
the real one: Redis stream, the server's one feed per session, uvicorn, HTTP chunks.

Run: ``.venv/bin/python benchmarks/server.py [--clients 1000] [--hold 60]``; ``--smoke`` (20 clients
held 2 s, 50 latency samples) runs in seconds, as CI does, to prove it still works.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

from baton.bus.connect import open_bus
from baton.bus.events import SessionStarted, TextDelta
from baton.testing import RedisServer, free_port

BATON = str(Path(sys.executable).parent / "baton")
SESSION = "s-bench"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Client:
    """One SSE reader; records when each ``text.delta`` (whose text is its emit time) arrived."""

    def __init__(self) -> None:
        self.latencies_ms: list[float] = []
        self.seen = 0
        self.connected = anyio.Event()
        self.alive = False
        self.target = 0
        self.reached = anyio.Event()

    async def run(self, http: httpx2.AsyncClient, after: str | None) -> None:
        headers = {"Last-Event-ID": after} if after else {}
        async with http.stream("GET", f"/sessions/{SESSION}/events", headers=headers) as response:
            assert response.status_code == 200, response.status_code
            self.alive = True
            self.connected.set()
            try:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and '"text.delta"' in line:
                        now = time.perf_counter_ns()
                        sent = int(json.loads(line[6:])["text"])
                        self.latencies_ms.append((now - sent) / 1e6)
                        self.seen += 1
                        if self.seen == self.target:
                            self.reached.set()
            finally:
                self.alive = False


async def emit(bus_url: str, count: int, every_s: float) -> None:
    async with open_bus(bus_url) as bus:
        for _ in range(count):
            await bus.log.emit(
                TextDelta(session=SESSION, agent="lead", text=str(time.perf_counter_ns()))
            )
            await anyio.sleep(every_s)


async def measure(url: str, bus_url: str, args: argparse.Namespace) -> dict[str, float | int]:
    async with open_bus(bus_url) as bus:
        start = await bus.log.emit(SessionStarted(session=SESSION, agent="lead", task="benchmark"))
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx2.Timeout(30.0, read=None)
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        # 1. Latency: one client, events one every 5 ms.
        one = Client()
        one.target = args.latency_events
        async with anyio.create_task_group() as group:
            group.start_soon(one.run, http, start)
            await one.connected.wait()
            await emit(bus_url, args.latency_events, 0.005)
            with anyio.move_on_after(5):
                await one.reached.wait()
            group.cancel_scope.cancel()
        # 2. Many clients held on the session, one event a second.
        clients = [Client() for _ in range(args.clients)]  # targets set once the hold is known
        async with open_bus(bus_url) as bus:
            last = [logged.cursor async for logged in bus.log.tail(SESSION, follow=False)][-1]
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for client in clients:
                group.start_soon(client.run, http, last)
            for client in clients:
                await client.connected.wait()
            connect_s = time.perf_counter() - began
            events = max(1, int(args.hold))
            for client in clients:
                client.target = events
            await emit(bus_url, events, args.hold / events)
            with anyio.move_on_after(10):
                for client in clients:
                    await client.reached.wait()
            held = sum(1 for c in clients if c.alive and c.seen == events)
            group.cancel_scope.cancel()
    fanout = [ms for client in clients for ms in client.latencies_ms]
    return {
        "sse_event_latency_p50_ms": round(statistics.median(one.latencies_ms), 3),
        "sse_event_latency_p99_ms": round(percentile(one.latencies_ms, 0.99), 3),
        "sse_latency_samples": len(one.latencies_ms),
        "sse_clients_held": held,
        "sse_clients_requested": args.clients,
        "sse_hold_s": args.hold,
        "sse_events_during_hold": events,
        "sse_clients_connect_s": round(connect_s, 2),
        "sse_fanout_latency_p50_ms": round(statistics.median(fanout), 2) if fanout else -1,
        "sse_fanout_latency_p99_ms": round(percentile(fanout, 0.99), 2) if fanout else -1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds the clients are held")
    parser.add_argument("--latency-events", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.clients, args.hold, args.latency_events = 20, 2.0, 50
    with RedisServer() as redis, tempfile.TemporaryDirectory() as media:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BATON_"))}
        server = subprocess.Popen(
            [BATON, "serve", "--port", str(port), "--bus", redis.url, "--media", media],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stderr is not None
            banner = server.stderr.readline()  # printed once it listens
            assert "baton serve:" in banner, banner
            result = anyio.run(measure, f"http://127.0.0.1:{port}", redis.url, args)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps(result, indent=2))
    # Every event reached the latency client, and every held client saw every event.
    assert result["sse_latency_samples"] == args.latency_events, result
    assert result["sse_clients_held"] == args.clients, result


if __name__ == "__main__":
    main()

"""Benchmark of ``baton serve``'s AG-UI endpoint (``POST /ag-ui``, docs/ag-ui.md).

Prints one JSON object, every figure from one server on one Redis bus, the offline model:

- ``first_event_ms``: from the ``POST`` of a new thread to its first event (``RUN_STARTED``,
  which comes once the thread's session is started), median and p95 of ``--runs`` threads;
  ``run_ms`` is each run read to its ``RUN_FINISHED``;
- ``replay``: one finished session of ``--tasks`` paintings read whole, ``--runs`` times each,
  through baton's native stream (``GET /sessions/{id}/events``) and through the adapter
  (``POST /ag-ui`` with ``Last-Event-ID: 0``). Both read the same log from the bus; the adapter
  also translates each logged event into AG-UI events and encodes them. ``log_events_per_s``
  counts the session's logged events delivered per second on each path, and ``ratio`` is the
  adapter's over the native stream's (1.0: free; 0.5: half as fast); ``ag_ui_events_per_s``
  counts the AG-UI events themselves (a logged event is one to a few of them).

The server runs in this process (``BatonServer`` on a loopback port, a ``redis-server`` started
here); the client speaks real HTTP to it.

Run: ``.venv/bin/python benchmarks/ag_ui.py [--runs 20] [--tasks 12]``; ``--smoke`` (3 runs,
3 tasks) runs in seconds, as CI does, to prove it still works.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder is first on sys.path, and this file is `ag_ui`: it would
# shadow the package the server speaks through (and `a2a.py` beside it, the A2A SDK).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
import httpx2  # noqa: E402

from baton.bus.connect import open_bus  # noqa: E402
from baton.lead.delegation import DelegationLimits  # noqa: E402
from baton.server import BatonServer, ServerConfig  # noqa: E402
from baton.testing import RedisServer  # noqa: E402

ANIMALS = ["fox", "heron", "owl", "hare", "wolf", "lynx", "otter", "crane", "stag", "badger",
           "raven", "seal", "mole", "newt", "ibex", "yak"]  # fmt: skip


def run_input(thread: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": uuid.uuid4().hex,
        "messages": [{"id": f"{thread}-u1", "role": "user", "content": text}],
    }


async def ag_ui_run(
    http: httpx2.AsyncClient, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[float, int, int, str]:
    """One run read to its end: ms to the first event, AG-UI events, logged events, last type."""
    began = time.perf_counter()
    first = 0.0
    events = logged = 0
    last = ""
    async with http.stream("POST", "/ag-ui", json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                if not events:
                    first = (time.perf_counter() - began) * 1000
                events += 1
                last = json.loads(line[6:])["type"]
            elif line.startswith("id: "):
                logged += 1
    assert last == "RUN_FINISHED", last
    return first, events, logged, last


async def native_read(http: httpx2.AsyncClient, session: str) -> int:
    """The session's native stream read whole: how many logged events it delivered."""
    logged = 0
    last = ""
    async with http.stream("GET", f"/sessions/{session}/events") as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                logged += 1
            elif line.startswith("event: "):
                last = line[7:]
    assert last == "session.finished", last
    return logged


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": round(statistics.median(values), 2), "p95": round(p95, 2)}


async def measure(bus_url: str, media: Path, runs: int, tasks: int) -> dict[str, Any]:
    # One painter per task, all in one turn (the default caps stop at 4 of a profile, 8 sends).
    limits = DelegationLimits(max_sends_per_turn=64, max_new_agents_per_profile=64)
    config = ServerConfig(
        port=0, bus_url=bus_url, media_dir=media, session_defaults={"delegation": limits}
    )
    async with open_bus(bus_url) as bus, BatonServer(config, bus=bus) as server:
        async with httpx2.AsyncClient(base_url=server.url, timeout=120.0) as http:
            await ag_ui_run(http, run_input(f"warm-{uuid.uuid4().hex[:8]}", "paint a fox"))
            first_ms, run_ms = [], []
            for _ in range(runs):
                thread = f"b-{uuid.uuid4().hex[:12]}"
                began = time.perf_counter()
                first, _, _, _ = await ag_ui_run(http, run_input(thread, "paint a fox"))
                run_ms.append((time.perf_counter() - began) * 1000)
                first_ms.append(first)
            prompt = " and ".join(f"paint a {a}" for a in (ANIMALS * 2)[:tasks])
            thread = f"big-{uuid.uuid4().hex[:12]}"
            body = run_input(thread, prompt)
            await ag_ui_run(http, body)  # the session, run to its end once
            native_s, adapter_s = 0.0, 0.0
            native_events = adapter_events = adapter_logged = 0
            for _ in range(runs):
                began = time.perf_counter()
                native_events += await native_read(http, thread)
                native_s += time.perf_counter() - began
                began = time.perf_counter()
                _, events, logged, _ = await ag_ui_run(http, body, {"Last-Event-ID": "0"})
                adapter_s += time.perf_counter() - began
                adapter_events += events
                adapter_logged += logged
    native_rate = native_events / native_s
    adapter_rate = adapter_logged / adapter_s
    return {
        "runs": runs,
        "first_event_ms": summary(first_ms),
        "run_ms": summary(run_ms),
        "replay": {
            "tasks": tasks,
            "log_events": native_events // runs,
            "ag_ui_events": adapter_events // runs,
            "native": {"log_events_per_s": round(native_rate)},
            "ag_ui": {
                "log_events_per_s": round(adapter_rate),
                "ag_ui_events_per_s": round(adapter_events / adapter_s),
            },
            "ratio": round(adapter_rate / native_rate, 3),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=12, help="paintings in the replayed session")
    parser.add_argument("--smoke", action="store_true", help="3 runs, 3 tasks, for CI")
    args = parser.parse_args()
    runs, tasks = (3, 3) if args.smoke else (args.runs, args.tasks)
    with RedisServer() as redis, tempfile.TemporaryDirectory() as media:
        result = anyio.run(measure, redis.url, Path(media), runs, tasks)
    print(json.dumps(result, indent=2))
    replay = result["replay"]
    # Both paths delivered the whole session: every logged event it has, on each.
    assert replay["log_events"] > 10 * tasks and replay["ag_ui_events"] > replay["log_events"]
    assert result["first_event_ms"]["median"] > 0 and replay["ratio"] > 0


if __name__ == "__main__":
    main()

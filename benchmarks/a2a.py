"""Benchmark of ``baton serve``'s A2A endpoint: what the A2A round trip costs over the HTTP API.

Prints one JSON object (milliseconds, medians of ``--runs`` sessions each, the same prompt on
the offline model, every session on the same server and Redis bus):

- ``http_roundtrip_ms``: ``POST /sessions``, then ``GET /sessions/{id}/events`` read to
  ``session.finished`` (the existing API's way to run a task to its end);
- ``a2a_stream_roundtrip_ms``: one ``SendStreamingMessage`` read to its COMPLETED status update,
  through the official SDK's client (JSON-RPC binding);
- ``a2a_send_roundtrip_ms``: one blocking ``SendMessage`` (answered with the COMPLETED task);
- ``a2a_stream_overhead_ms`` / ``a2a_send_overhead_ms``: each minus ``http_roundtrip_ms``;
- ``http_state_ms`` / ``a2a_get_task_ms``: reading one finished session, ``GET
  /sessions/{id}/state`` against ``GetTask`` (both fold the session's event log).

The server runs in this process (``BatonServer`` on a loopback port) on a Redis bus (a
``redis-server`` started here, as the tests do); the clients speak real HTTP to it.

Run: ``.venv/bin/python benchmarks/a2a.py [--runs 20] [--prompt "paint a fox"]``; ``--smoke``
(3 runs) runs in seconds, as CI does, to prove it still works.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder is first on sys.path, and this file is `a2a`: it would
# shadow the SDK it measures. The folder holds nothing else to import.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402

import anyio  # noqa: E402
import httpx  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.client.client import Client  # noqa: E402
from a2a.types import (  # noqa: E402
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from baton.bus.connect import open_bus  # noqa: E402
from baton.server import BatonServer, ServerConfig  # noqa: E402
from baton.testing import RedisServer  # noqa: E402

COMPLETED = TaskState.TASK_STATE_COMPLETED


def message(text: str) -> SendMessageRequest:
    said = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    return SendMessageRequest(message=said)


async def http_roundtrip(http: httpx.AsyncClient, prompt: str) -> str:
    started = await http.post("/sessions", json={"task": prompt})
    assert started.status_code == 201, started.text
    session: str = started.json()["id"]
    last = ""
    async with http.stream("GET", f"/sessions/{session}/events") as response:
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                last = line[7:]
    assert last == "session.finished", last
    return session


async def a2a_stream(client: Client, prompt: str) -> str:
    task, state = "", None
    async for response in client.send_message(message(prompt)):
        if response.HasField("task"):
            task = response.task.id
        elif response.HasField("status_update"):
            state = response.status_update.status.state
    assert state == COMPLETED, state
    return task


async def a2a_send(client: Client, prompt: str) -> str:
    responses = [response async for response in client.send_message(message(prompt))]
    (answer,) = responses
    assert answer.task.status.state == COMPLETED, answer.task.status
    return answer.task.id


async def timed(runs: int, step: Callable[[], Awaitable[object]]) -> list[float]:
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        await step()
        took.append((time.perf_counter() - began) * 1000)
    return took


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


async def measure(bus_url: str, media: Path, runs: int, prompt: str) -> dict[str, object]:
    config = ServerConfig(port=0, bus_url=bus_url, media_dir=media)
    async with open_bus(bus_url) as bus, BatonServer(config, bus=bus) as server:
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        timeout = httpx.Timeout(60.0)
        async with httpx.AsyncClient(base_url=url, timeout=timeout, trust_env=False) as http:
            streaming = await create_client(
                url, client_config=ClientConfig(httpx_client=http, streaming=True)
            )
            blocking = await create_client(
                url, client_config=ClientConfig(httpx_client=http, streaming=False)
            )
            await http_roundtrip(http, prompt)  # warm both paths up once
            task = await a2a_stream(streaming, prompt)
            sessions: list[str] = []

            async def via_http() -> None:
                sessions.append(await http_roundtrip(http, prompt))

            http_ms = await timed(runs, via_http)
            stream_ms = await timed(runs, lambda: a2a_stream(streaming, prompt))
            send_ms = await timed(runs, lambda: a2a_send(blocking, prompt))
            session = sessions[-1]
            state_ms = await timed(runs, lambda: http.get(f"/sessions/{session}/state"))
            get_ms = await timed(runs, lambda: blocking.get_task(GetTaskRequest(id=task)))
            got = await blocking.get_task(GetTaskRequest(id=task))
            assert got.status.state == COMPLETED and got.artifacts, got
    http_p50 = median(http_ms)
    return {
        "runs": runs,
        "prompt": prompt,
        "http_roundtrip_ms": http_p50,
        "a2a_stream_roundtrip_ms": median(stream_ms),
        "a2a_send_roundtrip_ms": median(send_ms),
        "a2a_stream_overhead_ms": round(median(stream_ms) - http_p50, 2),
        "a2a_send_overhead_ms": round(median(send_ms) - http_p50, 2),
        "http_state_ms": median(state_ms),
        "a2a_get_task_ms": median(get_ms),
        "media_artifacts_of_one_task": sum(
            1 for artifact in got.artifacts for part in artifact.parts if part.HasField("url")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--prompt", default="paint a fox")
    parser.add_argument("--smoke", action="store_true", help="3 runs, for CI")
    args = parser.parse_args()
    runs = 3 if args.smoke else args.runs
    with RedisServer() as redis, tempfile.TemporaryDirectory() as media:
        result = anyio.run(measure, redis.url, Path(media), runs, args.prompt)
    print(json.dumps(result, indent=2))
    # Each path ran every session to its end; the A2A task carried its picture as an artifact.
    assert result["media_artifacts_of_one_task"] == 1, result
    assert float(str(result["a2a_stream_roundtrip_ms"])) > 0, result


if __name__ == "__main__":
    main()

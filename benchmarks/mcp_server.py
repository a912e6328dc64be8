"""Benchmark of ``run`` over MCP against the same session run as ``baton run`` runs it.

Prints one JSON object:

- ``session_ms``: median wall time of the session alone — ``Session(...).run()`` in this process,
  on an in-process bus already open (as a server's sessions share its bus) and the offline model:
  what ``baton run`` does under its rendering;
- ``mcp_http_ms``: median wall time of the MCP tool call ``run`` with the same task, through the
  official ``mcp`` Python client over Streamable HTTP to ``/mcp`` of a ``baton serve`` in this
  process (its session on the server's bus), progress notifications on;
- ``mcp_stdio_ms``: the same over stdio, to a ``baton mcp`` process started once
  (``stdio_start_ms``: starting it and the handshake, not counted in the calls);
- ``http_ratio`` / ``stdio_ratio``: MCP's time over the session's: what ``run`` over MCP adds,
  as a factor (1.0: nothing);
- ``progress_lines``: the progress notifications one call sent.

Each round runs the three once, in turn, so a busy machine skews them alike; the task is the
README's two pictures (two painters, two PNGs inline in the result).

Run: ``.venv/bin/python benchmarks/mcp_server.py [--runs N] [--smoke]`` (``--smoke``: 2 runs, as
CI does, to prove it still works). Needs the ``mcp`` and ``server`` extras.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder is first on sys.path, where benchmarks/a2a.py would shadow
# the a2a SDK that `baton serve` loads. The folder holds nothing else to import.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from baton.bus.base import Bus  # noqa: E402
from baton.bus.connect import open_bus  # noqa: E402
from baton.server import BatonServer, ServerConfig  # noqa: E402
from baton.session import Session, SessionConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BATON = str(Path(sys.executable).parent / "baton")
TASK = "paint a fox and paint a heron"
TOKEN = "benchmark-token-0123456789abcdef"


async def session_once(bus: Bus, media: Path) -> float:
    started = time.perf_counter()
    async with Session(SessionConfig(task=TASK, media_dir=media), bus=bus) as session:
        result = await session.run()
    assert result.status == "completed", result
    return (time.perf_counter() - started) * 1000


def mcp_once(client: Client, lines: list[int]) -> Callable[[], Awaitable[float]]:
    async def once() -> float:
        count = 0

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            nonlocal count
            count += 1

        started = time.perf_counter()
        result = await client.call_tool("run", {"task": TASK}, progress_callback=progress)
        elapsed = (time.perf_counter() - started) * 1000
        structured: dict[str, Any] = result.structured_content or {}
        assert structured.get("status") == "completed", result
        assert len(structured["media_urls"]) == 2, structured
        lines.append(count)
        return elapsed

    return once


async def main(runs: int) -> dict[str, float | int]:
    work = Path(tempfile.mkdtemp(prefix="baton-bench-mcp-"))
    lines: list[int] = []
    samples: dict[str, list[float]] = {"session": [], "http": [], "stdio": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BATON_"))}
    env.update(PYTHONPATH=str(ROOT), BATON_MEDIA_DIR=str(work / "stdio-media"))
    stdio = StdioServerParameters(command=BATON, args=["mcp"], env=env, cwd=str(work))
    async with open_bus("memory://") as bus, open_bus("memory://") as own_bus:
        config = ServerConfig(port=0, bus_url=bus.url, media_dir=work / "http-media", token=TOKEN)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            BatonServer(config, bus=bus) as server,
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http,
            Client(streamable_http_client(server.url + "/mcp", http_client=http)) as over_http,
        ):
            started = time.perf_counter()
            async with Client(stdio) as over_stdio:
                stdio_start = (time.perf_counter() - started) * 1000
                rounds: dict[str, Callable[[], Awaitable[float]]] = {
                    "session": lambda: session_once(own_bus, work / "session-media"),
                    "http": mcp_once(over_http, lines),
                    "stdio": mcp_once(over_stdio, lines),
                }
                for once in rounds.values():  # warm up: first calls pay for imports and caches
                    await once()
                for _ in range(runs):
                    for name, once in rounds.items():
                        samples[name].append(await once())
    median = {name: statistics.median(values) for name, values in samples.items()}
    result: dict[str, float | int] = {
        "runs": runs,
        "task": TASK,  # type: ignore[dict-item]
        "session_ms": round(median["session"], 1),
        "mcp_http_ms": round(median["http"], 1),
        "mcp_stdio_ms": round(median["stdio"], 1),
        "http_ratio": round(median["http"] / median["session"], 2),
        "stdio_ratio": round(median["stdio"] / median["session"], 2),
        "stdio_start_ms": round(stdio_start, 1),
        "progress_lines": max(lines),
    }
    assert result["progress_lines"] >= 5, result  # the lead's and both painters' lines at least
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each kind (median)")
    parser.add_argument("--smoke", action="store_true", help="2 runs, for CI")
    options = parser.parse_args()
    print(json.dumps(anyio.run(main, 2 if options.smoke else options.runs)))

"""Benchmark of an MCP tool call against the same tool as a Python function in-process.

Prints one JSON object:

- ``python_us``: median time of one call of ``echo(text)`` as a baton :class:`~baton.engine.Tool`
  in this process (argument validation and the call: what the engine does around every tool);
- ``mcp_stdio_us`` / ``mcp_http_us``: the same, for ``echo`` served by an MCP server (this file,
  run with ``--serve``, on the ``mcp`` SDK's own server API) over stdio and over streamable HTTP on
  loopback, through :mod:`baton.subagents.mcp` (JSON-Schema validation, one shared connection);
- ``stdio_overhead_us`` / ``http_overhead_us``: what MCP adds per call (medians' difference);
- ``stdio_start_ms`` / ``http_start_ms``: starting the connection and listing the tools, once.

Calls are sequential, interleaved across the three, so a busy machine skews them alike.

Run: ``.venv/bin/python benchmarks/mcp_tools.py [--calls N] [--smoke]`` (``--smoke``: 20 calls,
as CI does, to prove it still works). Needs the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from baton.engine import Tool, tool
from baton.subagents.mcp import McpServers, McpTool
from baton.subagents.mcp_config import McpServerConfig

ROOT = Path(__file__).resolve().parents[1]
ARGS = '{"text": "hello"}'


@tool
async def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: what to say
    """
    return f"echo: {text}"


def serve(argv: list[str]) -> None:
    """``--serve stdio`` or ``--serve http PORT``: the MCP server the benchmark calls."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")

    @server.tool(name="echo")
    def echo_tool(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    if argv[0] == "http":
        port = int(argv[1])
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=port))
    else:
        anyio.run(server.run_stdio_async)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def http_server() -> AsyncIterator[str]:
    port = free_port()
    proc = await anyio.open_process(
        [sys.executable, __file__, "--serve", "http", str(port)],
        stdout=subprocess.DEVNULL,  # stdout is this benchmark's JSON alone
        stderr=None,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    assert proc.returncode is None, "the HTTP server exited"
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        with anyio.fail_after(10, shield=True):
            await proc.wait()


async def no_media(data: bytes, content_type: str) -> str:
    raise AssertionError("echo makes no media")


async def connect(servers: McpServers, config: McpServerConfig) -> tuple[McpTool, float]:
    started = time.perf_counter()
    (made,) = await servers.tools_for("benchmark", {"bench": config}, no_media)
    return made, (time.perf_counter() - started) * 1000


def timed(item: Tool) -> Callable[[], Awaitable[float]]:
    async def once() -> float:
        started = time.perf_counter()
        result = await item.invoke(item.parse(ARGS))
        elapsed = (time.perf_counter() - started) * 1e6
        assert result.content == "echo: hello", result.content
        return elapsed

    return once


async def main(calls: int) -> dict[str, float | int]:
    stdio = McpServerConfig(command=sys.executable, args=(__file__, "--serve", "stdio"),
                            env={"PYTHONPATH": str(ROOT)})  # fmt: skip
    async with McpServers() as servers, http_server() as url:
        over_stdio, stdio_start = await connect(servers, stdio)
        over_http, http_start = await connect(servers, McpServerConfig(url=url))
        runs = {"python": timed(echo), "stdio": timed(over_stdio), "http": timed(over_http)}
        for once in runs.values():  # warm up: first calls pay for imports and caches
            for _ in range(3):
                await once()
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(calls):
            for name, once in runs.items():
                samples[name].append(await once())
    median = {name: statistics.median(values) for name, values in samples.items()}
    result: dict[str, float | int] = {
        "calls": calls,
        "python_us": round(median["python"], 1),
        "mcp_stdio_us": round(median["stdio"], 1),
        "mcp_http_us": round(median["http"], 1),
        "stdio_overhead_us": round(median["stdio"] - median["python"], 1),
        "http_overhead_us": round(median["http"] - median["python"], 1),
        "stdio_start_ms": round(stdio_start, 1),
        "http_start_ms": round(http_start, 1),
    }
    assert median["python"] < median["stdio"] and median["python"] < median["http"], result
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="calls of each kind (median)")
    parser.add_argument("--smoke", action="store_true", help="20 calls, for CI")
    options = parser.parse_args()
    print(json.dumps(anyio.run(main, 20 if options.smoke else options.calls)))

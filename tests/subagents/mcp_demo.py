"""An MCP server for the tests, written with the ``mcp`` package's own server API (``MCPServer``,
the SDK's FastMCP): ``python -m tests.subagents.mcp_demo stdio`` or ``... http PORT`` (0: any free
port; ``MCP_DEMO_PORT_FILE`` receives the one it listens on).

Its tools are the cases baton must govern: a quick one (``echo``), a slow one, one that answers
with an image, one with an embedded resource, one a person must approve (``set_volume``, gated by
the profile's ``approve``), and one that kills the server in the middle of the call (once: a file
named by ``MCP_DEMO_CRASH_ONCE`` remembers that it did). ``MCP_DEMO_PID_FILE`` receives the
process id, so a test can check the server is gone once its owner closed. With
``MCP_DEMO_STUBBORN`` set it is the server no graceful stop ends: it ignores SIGTERM, SIGHUP and
SIGINT, and lives on after the end of its input.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp_types import ContentBlock, EmbeddedResource, TextContent, TextResourceContents

from baton.subagents.png import picture_for

server = MCPServer("baton-test", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
async def slow(text: str) -> str:
    """Take far longer than any test waits."""
    await anyio.sleep(60)
    return f"finally: {text}"


@server.tool()
def picture(prompt: str) -> Image:
    """Paint the prompt as a PNG."""
    return Image(data=picture_for(prompt), format="png")


@server.tool()
def report(text: str) -> list[ContentBlock]:
    """Write a report, attached as a resource."""
    memo = TextResourceContents(uri="memo://report", mime_type="text/plain", text=f"report: {text}")
    return [TextContent(text="the report is attached"), EmbeddedResource(resource=memo)]


@server.tool()
def set_volume(level: str) -> str:
    """Set the volume (a person approves each call)."""
    return f"volume set to {level}"


@server.tool()
def crash(text: str) -> str:
    """Kill the server in the middle of the call, the first time only."""
    marker = Path(os.environ["MCP_DEMO_CRASH_ONCE"])
    if not marker.exists():
        marker.write_text("crashed")
        os._exit(3)
    return f"survived: {text}"


async def serve_http(port: int, port_file: str | None) -> None:
    """Streamable HTTP on loopback, ``port`` 0 for one the system picks. The socket is bound and
    listening before the port goes into ``port_file`` (written whole, then renamed into place),
    so a client that reads it connects at once: a port the test picked and this process bound
    later could be taken meanwhile by another test's server, which the test would then take for
    this one."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the same port again, at once
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    if port_file:
        written = anyio.Path(f"{port_file}.part")
        await written.write_text(str(sock.getsockname()[1]))
        await written.replace(port_file)
    app = server.streamable_http_app(host="127.0.0.1")
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    await web.serve(sockets=[sock])


def main(argv: list[str]) -> None:
    stubborn = bool(os.environ.get("MCP_DEMO_STUBBORN"))
    if stubborn:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
    pid_file = os.environ.get("MCP_DEMO_PID_FILE")
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    if argv[:1] == ["http"]:
        anyio.run(serve_http, int(argv[1]), os.environ.get("MCP_DEMO_PORT_FILE"))
    else:
        anyio.run(server.run_stdio_async)
    while stubborn:  # its input ended: it stays anyway
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])

"""``baton mcp``: the MCP server over stdio, for a desktop host (one line of its configuration).

The process is the host's: it starts when the host does and ends when the host closes its stdin
(or with SIGINT/SIGTERM). It opens the configured bus (the in-process one by default: its
sessions then live as long as the process, tasks included), runs each ``run``'s session in its
own task group with an in-process worker, and serves until the host goes; then it cancels the
sessions still running, gracefully (their sub-agents are told to shut down). Only the protocol
is written on stdout: logs go to stderr.
"""

from __future__ import annotations

import logging
import signal
from contextlib import AsyncExitStack

import anyio
from mcp.server.stdio import stdio_server

from baton.bus.base import BusOptions
from baton.bus.connect import open_bus
from baton.server.config import ServerConfig
from baton.server.host import SessionHost
from baton.server.mcp.backend import McpBackend
from baton.server.mcp.server import build_server
from baton.session.compose import resolve_profiles

log = logging.getLogger(__name__)


async def serve_stdio(config: ServerConfig) -> int:
    """Serve MCP on stdin/stdout until the host closes it or a signal; the exit code."""
    async with AsyncExitStack() as stack:
        options = BusOptions(signing_key=config.signing_key)
        bus = await stack.enter_async_context(
            open_bus(config.bus_url, options, prefix=config.prefix)
        )
        await bus.ping()
        profiles = resolve_profiles(config.profiles)
        media_root = config.media_dir.resolve()
        media_root.mkdir(parents=True, exist_ok=True)
        group = await stack.enter_async_context(anyio.create_task_group())
        host = SessionHost(bus, group, profiles, config.session_defaults,
                           bus_outage_s=config.bus_outage_s)  # fmt: skip
        stack.push_async_callback(host.aclose)  # unwound first: the sessions end, then the rest
        server = build_server(McpBackend(bus, host, config, media_root, served=False))
        async with anyio.create_task_group() as serving:
            serving.start_soon(_stop_on_signal, serving.cancel_scope)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            serving.cancel_scope.cancel()  # the host closed stdin: stop watching for signals
    return 0


async def _stop_on_signal(serving: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("%s: stopping", signal.Signals(signum).name)
            serving.cancel()
            return

"""Running the server: :class:`BatonServer` (an async context manager, for tests and embedding)
and :func:`serve` (what ``baton serve`` runs until a signal).

The listening socket is bound before uvicorn starts, so when ``async with BatonServer(...)``
returns the port is known and connections already queue: readiness without polling. uvicorn's own
signal handling is switched off; the owner decides when to stop. Stopping goes in order: cancel
the sessions (they write ``session.finished``), end every SSE stream, let uvicorn finish the
responses in flight, then close the bus.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Generator, Mapping
from contextlib import AsyncExitStack, contextmanager

import anyio
import uvicorn

from baton.bus.base import Bus, BusOptions
from baton.bus.connect import open_bus
from baton.bus.errors import redact_url
from baton.bus.lifecycle import Service
from baton.server.app import create_app
from baton.server.config import ServerConfig, is_loopback
from baton.server.context import ServerContext
from baton.server.feeds import Feeds
from baton.server.host import SessionHost
from baton.server.mcp import routes_if_installed as mcp_routes_if_installed
from baton.session.compose import resolve_profiles
from baton.subagents.models import describe_model
from baton.subagents.profiles import Profile

log = logging.getLogger(__name__)

GRACEFUL_S = 5


class _Uvicorn(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the owner handles signals (see the module docstring)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class BatonServer(Service):
    """The HTTP server with its bus, sessions and feeds; ``url`` once entered. Use it once, as
    ``async with`` (a :class:`~baton.bus.lifecycle.Service`)."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        bus: Bus | None = None,
        profiles: Mapping[str, Profile] | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self._given_bus = bus
        self._profiles = profiles
        self._uvicorn: _Uvicorn | None = None
        self._served = anyio.Event()
        self.ctx: ServerContext | None = None
        self.port = config.port

    @property
    def url(self) -> str:
        host = self.config.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}"

    async def _open(self, stack: AsyncExitStack) -> None:
        config = self.config
        bus = self._given_bus
        if bus is None:
            options = BusOptions(signing_key=config.signing_key, outage_s=config.bus_outage_s)
            opened = open_bus(config.bus_url, options, prefix=config.prefix)
            bus = await stack.enter_async_context(opened)
        profiles = self._profiles
        if profiles is None:
            profiles = resolve_profiles(config.profiles)
        media_root = config.media_dir.resolve()
        media_root.mkdir(parents=True, exist_ok=True)
        group = await stack.enter_async_context(anyio.create_task_group())
        feeds = Feeds(bus, group, outage_s=config.bus_outage_s)
        host = SessionHost(
            bus, group, profiles, config.session_defaults, bus_outage_s=config.bus_outage_s
        )
        self.ctx = ServerContext(config, bus, feeds, host, media_root, config.model)
        sock = bind(config.host, config.port)
        self.port = sock.getsockname()[1]
        mcp = await mcp_routes_if_installed(stack, self.ctx)  # /mcp (docs/mcp-server.md)
        uv = uvicorn.Config(
            create_app(self.ctx, mcp),
            lifespan="off",
            log_config=None,
            log_level=config.log_level,
            access_log=False,
            timeout_graceful_shutdown=GRACEFUL_S,
            server_header=False,
        )
        self._uvicorn = _Uvicorn(uv)
        group.start_soon(self._serve, sock, name="uvicorn")
        stack.push_async_callback(self._stop)  # unwound first, while the bus is still open

    async def _serve(self, sock: socket.socket) -> None:
        assert self._uvicorn is not None
        try:
            await self._uvicorn.serve(sockets=[sock])
        finally:
            sock.close()
            self._served.set()

    async def _stop(self) -> None:
        """Stop in order (see the module docstring), shielded: the owner may be cancelled."""
        assert self.ctx is not None and self._uvicorn is not None
        with anyio.CancelScope(shield=True):
            await self.ctx.host.aclose()
            self.ctx.feeds.close()
            self._uvicorn.should_exit = True
            with anyio.move_on_after(GRACEFUL_S + 1):
                await self._served.wait()
            self.ctx.feeds.group.cancel_scope.cancel()


async def serve(config: ServerConfig) -> int:
    """Serve until SIGINT/SIGTERM (the first stops gracefully, a second at once); exit code."""
    async with BatonServer(config) as server:
        where = "" if is_loopback(config.host) else " (token required)"
        model = describe_model(config.model)  # as `baton run` and `baton worker` say it
        print(f"baton serve: {server.url}/{where} · bus {redact_url(config.bus_url)} · {model}",
              file=sys.stderr, flush=True)  # fmt: skip
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("%s: stopping", signal.Signals(signum).name)
                break
    return 0

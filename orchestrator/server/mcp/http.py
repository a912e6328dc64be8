"""``/mcp`` on ``baton serve``: the MCP server over Streamable HTTP, through the SDK's session
manager (both eras: 2025-11-25 sessions with ``Mcp-Session-Id``, which can carry the server's
elicitation requests, and 2026-07-28 single exchanges).

It sits behind the server's token guard like every route (``Authorization: Bearer <token>``: the
admin token; a session token is ``403`` here, since MCP reaches every session), so every MCP
request, task requests included, is authorised by the same token. A server without a token
(only a loopback one may be) has the SDK's DNS-rebinding protection on instead (only
``localhost``-style ``Host`` and ``Origin`` headers): a web page cannot drive it through a
visitor's browser. With a token the token is that protection — a rebound page does not have it —
so a request that carries it is not refused for its ``Host`` (a tunnel, a proxy's name).
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import BaseRoute, Route

from baton.server.context import ServerContext
from baton.server.mcp.backend import McpBackend
from baton.server.mcp.server import build_server

MCP_PATH = "/mcp"
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


async def mcp_routes(stack: AsyncExitStack, ctx: ServerContext) -> list[BaseRoute]:
    """The ``/mcp`` route over ``ctx``, its session manager running in ``stack``."""
    server = build_server(McpBackend.of_server(ctx))
    security = None
    if ctx.config.token is None:  # a loopback server (the config refuses any other without one)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=LOOPBACK_HOSTS,
            allowed_origins=LOOPBACK_ORIGINS,
        )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)
    await stack.enter_async_context(manager.run())
    return [Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))]

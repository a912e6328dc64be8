"""``baton serve``: the HTTP API, Server-Sent Events and the live pages (docs/http.md).

Needs the ``server`` extra (Starlette, sse-starlette, uvicorn). Embed it with::

    async with BatonServer(ServerConfig(port=0)) as server:
        print(server.url)

Modules: :mod:`.config` (settings and the token rule), :mod:`.run` (lifecycle), :mod:`.app`
(routes and guards), :mod:`.routes` (JSON API), :mod:`.sse` and :mod:`.feeds` (the event stream),
:mod:`.security` (token, bodies), :mod:`.media`, :mod:`.pages` + ``assets/``, :mod:`.openapi`,
:mod:`.state` (a session folded from its events), :mod:`.host` (sessions run by the server);
:mod:`.a2a` (A2A 1.0) and :mod:`.mcp` (``/mcp`` and ``baton mcp``: the MCP server).
"""

from baton.server.config import ServerConfig, is_loopback
from baton.server.run import BatonServer, serve

__all__ = ["BatonServer", "ServerConfig", "is_loopback", "serve"]

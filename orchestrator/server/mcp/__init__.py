"""baton as an MCP server (docs/mcp-server.md), on the official ``mcp`` SDK: ``baton mcp`` over
stdio, ``/mcp`` on ``baton serve`` over Streamable HTTP; clients of 2025-11-25 and 2026-07-28.

One module a job: :mod:`.schemas` (the tools' arguments and results), :mod:`.tools` (the tools),
:mod:`.call` (one request: its era, what its client can do), :mod:`.follow` and :mod:`.fold`
(a session's log followed and folded), :mod:`.progress` (events as progress lines),
:mod:`.asking` and :mod:`.askers` (questions to a person as elicitations), :mod:`.results` and
:mod:`.media` (the result, media as links and resources), :mod:`.tasks` and :mod:`.task_methods`
(``run`` as a task, both revisions), :mod:`.backend` (bus, session host, settings),
:mod:`.server` (the SDK server put together), :mod:`.http` and :mod:`.stdio` (the transports).
The SDK is the ``mcp`` extra: without it ``baton serve`` runs without ``/mcp``
(:func:`routes_if_installed`) and ``baton mcp`` says which extra to install.

(Profiles' MCP *tools* — baton as an MCP client — are :mod:`baton.subagents.mcp`, apart.)
"""

from __future__ import annotations

import importlib.util
import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from baton.errors import install_hint

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from baton.server.context import ServerContext

log = logging.getLogger(__name__)


async def routes_if_installed(stack: AsyncExitStack, ctx: ServerContext) -> list[BaseRoute]:
    """``/mcp``, or nothing when the ``mcp`` extra is not installed (said once in the log)."""
    if importlib.util.find_spec("mcp") is None:
        log.info("MCP endpoint off: %s for it", install_hint("mcp"))
        return []
    from baton.server.mcp.http import mcp_routes

    return await mcp_routes(stack, ctx)

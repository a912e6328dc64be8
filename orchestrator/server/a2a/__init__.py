"""``baton serve`` as an A2A 1.0 server (docs/a2a.md), through the official ``a2a-sdk``.

One module a job: :mod:`.paths` (where it lives), :mod:`.access` (what a session token may do),
:mod:`.card` (the agent card), :mod:`.contexts` (a task's context, written in its id, and a
context's tasks), :mod:`.mapping` (baton's events as A2A tasks, updates and artifacts),
:mod:`.messages` (a client message's text and verdict), :mod:`.tracing` (the caller's
``traceparent``), :mod:`.reading` (tasks read from the sessions' logs), :mod:`.sending` (what a
client's message does), :mod:`.handler` (the SDK's request handler over the server's bus),
:mod:`.routes` (the Starlette routes). The SDK is the ``a2a`` extra: without it the server
runs without these routes (:func:`routes_if_installed`).
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING

from baton.errors import install_hint

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from baton.server.context import ServerContext

log = logging.getLogger(__name__)


def routes_if_installed(ctx: ServerContext) -> list[BaseRoute]:
    """The A2A routes, or none when the ``a2a`` extra is not installed (said once in the log)."""
    if importlib.util.find_spec("a2a") is None:
        log.info("A2A endpoint off: %s for it", install_hint("a2a"))
        return []
    from baton.server.a2a.routes import a2a_routes

    return a2a_routes(ctx)

"""The A2A routes of ``baton serve``: the card, and both bindings built by the SDK over
:class:`~.handler.BatonRequestHandler` (paths in :mod:`.paths`, docs/a2a.md)."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_jsonrpc_routes,
    create_rest_routes,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router

from baton.server.a2a.body import BodyLimit
from baton.server.a2a.card import build_card
from baton.server.a2a.handler import BatonRequestHandler
from baton.server.a2a.paths import CARD_PATH, JSONRPC_PATH, REST_PREFIX
from baton.server.a2a.reading import ROOT
from baton.server.context import ServerContext


def root_of(request: Request) -> str:
    """The server's root URL as the client reached it (no trailing slash)."""
    return str(request.base_url).rstrip("/")


class ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the root URL the media artifacts' URLs are made absolute
    against (a client may not resolve ``/media/…`` paths itself)."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[ROOT] = root_of(request)
        return context


async def agent_card(request: Request) -> Response:
    ctx = ServerContext.of(request)
    card = build_card(root_of(request), list(ctx.host.profiles.values()),
                      token=ctx.config.token is not None)  # fmt: skip
    return JSONResponse(agent_card_to_dict(card), headers={"Cache-Control": "no-cache"})


def a2a_routes(ctx: ServerContext) -> list[BaseRoute]:
    """The card and both bindings over ``ctx``."""
    handler = BatonRequestHandler(ctx)
    builder = ContextBuilder()
    limit = ctx.config.max_body_bytes  # the SDK reads whole bodies: bounded first (.body)
    jsonrpc = create_jsonrpc_routes(handler, JSONRPC_PATH, context_builder=builder)
    for route in jsonrpc:
        route.app = BodyLimit(route.app, limit, "jsonrpc")
    rest = Router(routes=create_rest_routes(handler, context_builder=builder))
    return [
        Route(CARD_PATH, agent_card, methods=["GET"]),
        *jsonrpc,
        Mount(REST_PREFIX, app=BodyLimit(rest, limit, "rest")),
    ]

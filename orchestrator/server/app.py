"""The Starlette application: routes, error bodies, and the guards around them.

Middleware order matters: CORS (only when origins are configured) sits outside the token guard so
a browser's preflight can be answered; the token guard sits outside routing so even an unknown
path answers 401 rather than telling a stranger what exists (and a session token's 403 is decided
from the path alone, before any route looks a session up). The guard reads session tokens' scopes
from the bus (:mod:`.access`).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from baton.server import health, media, pages, questions, routes, sse
from baton.server.a2a import routes_if_installed
from baton.server.a2a.tracing import TraceparentMiddleware
from baton.server.ag_ui import routes_if_installed as ag_ui_routes
from baton.server.context import ServerContext
from baton.server.openapi import openapi_document
from baton.server.security import BodyInvalid, TokenGuard

MCP_HEADERS = ("Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name")
"""What a browser's MCP client sends to ``/mcp`` (docs/mcp-server.md) beside the API's headers."""


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"detail": exc.detail, "errors": []}, status_code=exc.status_code,
                        headers=exc.headers)  # fmt: skip


async def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BodyInvalid)
    return JSONResponse({"detail": exc.detail, "errors": exc.errors}, status_code=422)


def create_app(ctx: ServerContext, extra: Sequence[BaseRoute] = ()) -> Starlette:
    """The ASGI app over a running context (bus, feeds and session host already open);
    ``extra``: routes whose parts run beside it (``/mcp``, whose session manager the server
    starts, :mod:`baton.server.mcp`)."""
    table = [
        Route("/", pages.index_page, methods=["GET"]),
        Route("/sessions", routes.get_sessions, methods=["GET"]),
        Route("/sessions", routes.start_session, methods=["POST"]),
        Route("/sessions/{id}", pages.session_page, methods=["GET"]),
        Route("/sessions/{id}/state", routes.get_state, methods=["GET"]),
        Route("/sessions/{id}/events", sse.session_events, methods=["GET"]),
        Route("/sessions/{id}/messages", routes.post_message, methods=["POST"]),
        Route("/sessions/{id}/approvals/{call_id}", routes.decide, methods=["POST"]),
        Route("/sessions/{id}/questions/{question_id}", questions.answer, methods=["POST"]),
        Route("/sessions/{id}/cancel", routes.cancel, methods=["POST"]),
        Route("/profiles", routes.get_profiles, methods=["GET"]),
        Route("/healthz", health.health, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        Route("/media/{path:path}", media.media_file, methods=["GET"]),
        Route("/assets/{name}", pages.asset, methods=["GET"]),
        Route("/favicon.ico", pages.favicon, methods=["GET"]),
        *routes_if_installed(ctx),  # A2A: the card and both bindings (docs/a2a.md)
        *extra,
        *ag_ui_routes(),  # AG-UI: POST /ag-ui and its capabilities (docs/ag-ui.md)
    ]
    middleware: list[Middleware] = []
    if ctx.config.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(ctx.config.cors_origins),
                allow_methods=["GET", "POST", "DELETE"],  # DELETE: an MCP session's end
                allow_headers=[
                    "Authorization",
                    "Content-Type",
                    "Last-Event-ID",
                    "Accept",
                    *MCP_HEADERS,
                ],
                expose_headers=["Mcp-Session-Id"],
            )
        )
    if ctx.config.token is not None:
        middleware.append(Middleware(TokenGuard, token=ctx.config.token, bus=ctx.bus))
    middleware.append(Middleware(TraceparentMiddleware))  # an A2A caller's trace goes on
    app = Starlette(
        routes=table,
        middleware=middleware,
        exception_handlers={
            HTTPException: _http_error,
            BodyInvalid: _invalid,
        },
    )
    app.state.baton = ctx
    return app

"""The live pages: ``/`` (sessions and a form to start one) and ``/sessions/{id}`` (one session,
live). Plain HTML, CSS and a little JavaScript from :mod:`baton.server.assets`; no build
step. The page is a viewer of the same SSE stream any client can read; the only server-side
input it needs is the media root, to turn the tools' ``file://`` URLs into ``/media/`` links.
"""

from __future__ import annotations

import html
from functools import cache
from importlib.resources import files

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from baton.server.context import ServerContext
from baton.server.routes import known_state

ASSETS = {
    "app.js": "text/javascript",
    "session.js": "text/javascript",
    "style.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def _asset(name: str) -> str:
    return files("baton.server.assets").joinpath(name).read_text(encoding="utf-8")


def _page(name: str, status: int = 200, **values: str) -> HTMLResponse:
    text = _asset(name)
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", html.escape(value, quote=True))
    return HTMLResponse(text, status_code=status, headers=PAGE_HEADERS)


async def index_page(request: Request) -> Response:
    return _page("index.html")


async def session_page(request: Request) -> Response:
    """The live page, or a 404 page that says the session does not exist (a live page of a
    session nobody will ever log would wait forever for its events)."""
    ctx = ServerContext.of(request)
    try:
        session = ctx.session_id(request)
        await known_state(ctx, session)
    except HTTPException as exc:
        if exc.status_code != 404:
            raise
        return _page("missing.html", 404, SESSION=str(request.path_params["id"])[:80])
    return _page("session.html", SESSION=session, MEDIA_ROOT=ctx.media_root.as_uri() + "/")


async def favicon(request: Request) -> Response:
    """``/favicon.ico``, which browsers ask for whatever the page links: the same SVG icon."""
    return _asset_response("favicon.svg")


async def asset(request: Request) -> Response:
    return _asset_response(str(request.path_params["name"]))


def _asset_response(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(404, "no such asset")
    return Response(
        _asset(name),
        media_type=media_type,
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"},
    )

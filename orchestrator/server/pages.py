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

ASSETS = {"app.js": "text/javascript", "session.js": "text/javascript", "style.css": "text/css"}
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


def _page(name: str, **values: str) -> HTMLResponse:
    text = _asset(name)
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", html.escape(value, quote=True))
    return HTMLResponse(text, headers=PAGE_HEADERS)


async def index_page(request: Request) -> Response:
    return _page("index.html")


async def session_page(request: Request) -> Response:
    ctx = ServerContext.of(request)
    session = ctx.session_id(request)
    return _page("session.html", SESSION=session, MEDIA_ROOT=ctx.media_root.as_uri() + "/")


async def asset(request: Request) -> Response:
    name = str(request.path_params["name"])
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(404, "no such asset")
    return Response(
        _asset(name),
        media_type=media_type,
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"},
    )

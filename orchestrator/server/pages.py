"""The live pages: ``/`` (sessions and a form to start one) and ``/sessions/{id}`` (one session,
live). Plain HTML, CSS and a little JavaScript from :mod:`baton.server.assets`; no build
step. The session page arrives with the session as it stands (:mod:`.first_paint`), and its
script follows the same SSE stream any client can read from the log's last cursor on. The page
names no server path: media are ``/media/`` links, and the script maps the tools' ``file://``
URLs by the session's folder in them.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib.resources import files

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from baton.bus.messages import ApproveMode
from baton.server.approval_policy import allowed_modes, session_approve
from baton.server.context import ServerContext
from baton.server.first_paint import fragments
from baton.server.state import fold_session

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


_PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")


@cache
def _asset(name: str) -> str:
    return files("baton.server.assets").joinpath(name).read_text(encoding="utf-8")


def _page(
    name: str, status: int = 200, markup: dict[str, str] | None = None, **values: str
) -> HTMLResponse:
    """The template ``name`` with ``values`` escaped and ``markup`` (already HTML) put in, in
    one pass over the template: a value that itself reads ``{{TASK}}`` stays text."""
    filled = {key: html.escape(value, quote=True) for key, value in values.items()}
    filled.update(markup or {})

    def fill(found: re.Match[str]) -> str:
        return filled.get(found.group(1), found.group(0))

    text = _PLACEHOLDER.sub(fill, _asset(name))
    return HTMLResponse(text, status_code=status, headers=PAGE_HEADERS)


_APPROVE_LABELS: dict[ApproveMode, str] = {
    "ask": "ask (answered on the page)",
    "auto": "approve all",
    "deny": "decline all",
}


async def index_page(request: Request) -> Response:
    """The start page; its approvals offer only what the server's policy lets a client ask
    for (server/approval_policy.py), the default selected."""
    policy = ServerContext.of(request).config.approve
    chosen = session_approve(None, policy)
    options = "".join(
        f'<option value="{mode}"{" selected" if mode == chosen else ""}>{_APPROVE_LABELS[mode]}'
        "</option>"
        for mode in ("ask", "auto", "deny")
        if mode in allowed_modes(policy)
    )
    return _page("index.html", markup={"APPROVE_OPTIONS": options})


async def session_page(request: Request) -> Response:
    """The live page, or a 404 page that says the session does not exist (a live page of a
    session nobody will ever log would wait forever for its events)."""
    ctx = ServerContext.of(request)
    try:
        session = ctx.session_id(request)
    except HTTPException:
        return _missing(request)
    folder = await fold_session(ctx.bus.log, session)
    if folder.events == 0 and not ctx.host.is_hosted(session):
        return _missing(request)
    return _page("session.html", markup=fragments(folder, ctx.media_root), SESSION=session)


def _missing(request: Request) -> HTMLResponse:
    return _page("missing.html", 404, SESSION=str(request.path_params["id"])[:80])


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

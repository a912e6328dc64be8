"""Who may call the server, and what a request body may be.

**Token.** When the server has a token, every request — API, SSE, media, pages, assets, the
OpenAPI document, unknown paths — must carry a token, in one of three ways, because a browser
cannot put headers on everything it fetches:

- ``Authorization: Bearer <token>`` (programs);
- ``?token=<token>`` (an ``EventSource`` or a link; on a page it is swapped for the cookie);
- the ``baton_token`` cookie, set (``HttpOnly``, ``SameSite=Strict``) when a page is opened with
  ``?token=``, so the page's own ``EventSource``, ``fetch`` and ``<img>`` requests carry it.

The first of these a request carries is the one that counts: a token given explicitly wins over
an older cookie. The server's token is the admin token (everything; compared in constant time);
a session token (:mod:`.access`) opens one session's routes, read-only or read-write, and is
``403`` anywhere else. A token that is neither is ``401`` with ``WWW-Authenticate: Bearer``, as
is a request without one; ``503`` when a session token cannot be checked (the bus is down).
A cross-site page cannot ride on the cookie: it is ``SameSite=Strict``, and every ``POST`` needs a
JSON body, which a cross-origin form cannot send without a CORS preflight (closed by default),
but for an upload answering a question, which must come from this server's own page when the
cookie is what authorises it (:func:`refuse_cross_site_upload`).

The A2A agent card (``/.well-known/agent-card.json``) is public. On the A2A routes a session
token's request names its task in the body, so that body is read (bounded) and decided by
:mod:`baton.server.a2a.access` (docs/a2a.md, *Tokens*).

**Bodies.** JSON only (``415`` otherwise; an upload is multipart, :mod:`.questions`), at most
``max_body_bytes`` (``413``, counted as the bytes arrive, not trusted from ``Content-Length``),
validated against the route's model (``422`` with one line naming the first bad field, and every
error listed).
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode

from pydantic import BaseModel, ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.bus.base import Bus
from baton.bus.errors import BusError
from baton.server.a2a import access as a2a_access
from baton.server.a2a import wellformed
from baton.server.a2a.paths import CARD_PATH, is_a2a
from baton.server.access import Grant, session_grant

COOKIE = "baton_token"
CREDENTIAL = "baton_credential"
"""Where the request's state says which credential the guard accepted: ``named`` (a bearer or
``?token=`` the caller wrote), ``cookie``, or ``none`` (the server has no token)."""
QUERY = "token"
PAGES = frozenset({"/"})
A2A_BODY_LIMIT = 1 << 20
"""The most of an A2A body a session token's request is read for (its task id is inside)."""

Model = TypeVar("Model", bound=BaseModel)


class TokenGuard:
    """ASGI middleware: no token, no service (see the module docstring)."""

    def __init__(self, app: ASGIApp, token: str, bus: Bus) -> None:
        self.app = app
        self._token = token.encode()
        self._bus = bus

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["path"] == CARD_PATH:  # the A2A agent card is public (docs/a2a.md)
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        method = scope.get("method", "GET")
        bearer, in_query = _bearer(headers), query.get(QUERY) or None
        cookie = _cookie(headers)
        given = bearer or in_query or cookie
        # Which credential counts, for the routes a browser could be made to call cross-site
        # (refuse_cross_site_upload): a cookie rides along by itself, a named token does not.
        credential = "named" if bearer or in_query else "cookie" if cookie else "none"
        scope.setdefault("state", {})[CREDENTIAL] = credential
        try:
            refused = await self._refusal(given, method, scope["path"])
        except BusError as exc:  # the bus decides about session tokens: no answer, no entry
            refused = _error(503, f"cannot check the session token now: {exc}")
        if isinstance(refused, Grant):  # a session token on A2A: its task is named in the body
            receive, refused = await _a2a_refusal(refused, method, scope, receive)
        if refused is not None:
            await refused(scope, receive, send)
        elif (
            bearer is None and in_query is not None and method == "GET" and _is_page(scope["path"])
        ):
            await _swap_for_cookie(scope, query, in_query)(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _refusal(self, given: str | None, method: str, path: str) -> Response | Grant | None:
        """None when ``given`` lets the request through; else the answer (401 or 403); the
        grant of a session token on an A2A path, which is decided from the body too."""
        if given is None:
            return _unauthorised()
        if hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._token):
            return None
        grant = await session_grant(self._bus, given)
        if grant is None:
            return _unauthorised()
        if is_a2a(path):
            return grant
        reason = grant.refusal(method, path)
        return None if reason is None else _error(403, reason)


async def _a2a_refusal(
    grant: Grant, method: str, scope: Scope, receive: Receive
) -> tuple[Receive, Response | None]:
    """A session token's A2A request, decided from its body (:mod:`baton.server.a2a.access`):
    the body is read here (at most ``A2A_BODY_LIMIT`` bytes) and handed on unchanged. A
    malformed request names no task: it is answered with its binding's error (as the route
    would answer anyone), by the one reading of A2A input, :mod:`baton.server.a2a.wellformed`."""
    body = bytearray()
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        more = bool(message.get("more_body", False))
        if len(body) > A2A_BODY_LIMIT:
            return receive, _error(413, f"the body is over the {A2A_BODY_LIMIT}-byte limit")
    path, given = scope["path"], bytes(body)
    malformed = wellformed.refusal(wellformed.binding_of(path), method, Headers(scope=scope), given)
    if malformed is not None:
        return receive, malformed
    target = a2a_access.target_of(method, path, given)
    reason = a2a_access.refusal(grant.session, grant.scope, target)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": bytes(body), "more_body": False}

    return replay, None if reason is None else _error(403, reason)


def _unauthorised() -> Response:
    return JSONResponse(
        {"detail": "a bearer token is required: send 'Authorization: Bearer <token>', "
                   "or ?token=<token> on a page or an EventSource URL", "errors": []},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="baton"'},
    )  # fmt: skip


def _error(status: int, detail: str) -> Response:
    return JSONResponse({"detail": detail, "errors": []}, status_code=status)


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _cookie(headers: Headers) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed cookie header is just no cookie
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def _is_page(path: str) -> bool:
    if path in PAGES:
        return True
    parts = path.strip("/").split("/")
    return len(parts) == 2 and parts[0] == "sessions"


def _swap_for_cookie(scope: Scope, query: dict[str, str], token: str) -> RedirectResponse:
    """Redirect a page opened with ``?token=`` to the same URL without it, setting the cookie,
    so the token leaves the address bar and history and the page's requests carry it."""
    rest = urlencode({k: v for k, v in query.items() if k != QUERY})
    response = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
    return response


async def read_model(request: Request, model: type[Model], limit: int) -> Model:
    """The request's JSON body as ``model``, or the HTTP error that says what is wrong."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise HTTPException(415, "send the body as JSON (Content-Type: application/json)")
    body = await read_body(request, limit)
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyInvalid(f"the body is not valid JSON: {exc}", []) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        listed: list[dict[str, object]] = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in errors
        ]
        raise BodyInvalid(f"{where}: {first['msg']}", listed) from exc


async def read_body(request: Request, limit: int, over: str = "") -> bytes:
    """The request's body, read as it arrives and refused (``413``, ``over`` or the limit said)
    once past ``limit`` bytes: ``Content-Length`` is checked first but never trusted."""
    why = over or f"the body is over the {limit}-byte limit"
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, why)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, why)
    return bytes(body)


def refuse_cross_site_upload(request: Request) -> None:
    """403 for a multipart ``POST`` that a page of another origin sent and that no token the
    caller named authorises: unlike a JSON body, a form from any page of the same site (another
    port on ``localhost``) can send one without a preflight, and ``SameSite=Strict`` lets the
    cookie go with it; on a server without a token, any page could. A browser says where a
    request comes from (``Sec-Fetch-Site``; ``Origin`` where it is older), a program need not:
    one that names its token, or sends neither header to a server without a token, is no
    browser riding on a cookie."""
    credential = request.scope.get("state", {}).get(CREDENTIAL, "none")
    if credential == "named":
        return
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.url.netloc}"
    if site is not None:
        allowed = site == "same-origin"
    elif origin is not None:
        allowed = origin == own
    else:
        allowed = credential == "none"  # a cookie is a browser's, and a browser names its origin
    if not allowed:
        said = f"Sec-Fetch-Site {site}" if site is not None else f"Origin {origin or 'missing'}"
        raise HTTPException(
            403, f"an upload must come from this server's own page ({said}); a program sends "
            "its token (Authorization: Bearer) instead"
        )  # fmt: skip


class BodyInvalid(Exception):
    """A body that parsed but does not fit (or did not parse): answered as 422."""

    def __init__(self, detail: str, errors: list[dict[str, object]]) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors

"""What reaches the SDK on the A2A bindings: a bounded body, and only a well-formed request.

**Size.** The SDK reads a request's whole body before it looks at it, so without a bound a client
could make the server buffer any amount (docs/a2a.md). The body is read here, counted as it
arrives (a ``Content-Length`` over the limit is refused before any of it is read), answered
``413`` past ``max_body_bytes`` as on the HTTP API.

**Shape.** The body and the ``A2A-Version`` header are then checked (:mod:`.wellformed`), and
the parameters parsed as the SDK will (:mod:`.params`): a malformed request gets the binding's
error (``-32700``, ``-32600``, ``-32602``, ...; REST ``400``) in our words, never the SDK's
``-32603`` with an exception's text. What passes is handed on unchanged;
what follows it (a disconnect a stream listens for) passes through.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.server.a2a.params import check_params
from baton.server.a2a.wellformed import Binding, Malformed, check, error_response


class BodyLimit:
    """ASGI wrapper: at most ``limit`` bytes of body reach ``app`` (else the 413), and only a
    request well-formed for ``binding`` (else its error)."""

    def __init__(self, app: ASGIApp, limit: int, binding: Binding) -> None:
        self.app = app
        self.limit = limit
        self.binding: Binding = binding

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        first: Message | None = None
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                first = message
                break
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > self.limit:
                await self._refuse(scope, receive, send)
                return
        if first is None:
            method = scope.get("method", "GET")
            try:
                request = check(self.binding, method, headers, bytes(body))
                check_params(self.binding, method, scope["path"], request)
            except Malformed as refused:
                await error_response(self.binding, refused)(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return first or {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the body is over the {self.limit}-byte limit (max_body_bytes)"
        await JSONResponse({"detail": detail, "errors": []}, status_code=413)(scope, receive, send)

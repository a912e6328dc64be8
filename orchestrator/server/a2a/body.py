"""The server's body limit on the A2A bindings: the SDK reads a request's whole body before it
looks at it, so without this a client could make the server buffer any amount (docs/a2a.md).

The body is read here, counted as it arrives (a ``Content-Length`` over the limit is refused
before any of it is read), answered ``413`` past ``max_body_bytes`` as on the HTTP API, and
otherwise handed on unchanged; what follows it (a disconnect a stream listens for) passes through.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """ASGI wrapper: at most ``limit`` bytes of body reach ``app`` (else the 413)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
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

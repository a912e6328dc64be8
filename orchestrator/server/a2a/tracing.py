"""The trace an A2A request arrives in: its ``traceparent`` (W3C trace context) is the current
context while the request is handled, so the SDK's own spans and the session the request
starts (whose task inherits the context) continue the caller's trace: the A2A hop and the
session are one trace (docs/a2a.md, *Tracing*).

OpenTelemetry is optional (the ``otel`` extra): without it, or without the header, the request
passes untouched.
"""

from __future__ import annotations

import importlib.util

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from baton.server.a2a.paths import is_a2a

_INSTALLED = importlib.util.find_spec("opentelemetry") is not None


class TraceparentMiddleware:
    """ASGI middleware: an A2A request runs in the trace context its headers carry."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _INSTALLED or scope["type"] != "http" or not is_a2a(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        traceparent = headers.get("traceparent")
        if not traceparent:
            await self.app(scope, receive, send)
            return
        from opentelemetry import context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier = {"traceparent": traceparent}
        if headers.get("tracestate"):
            carrier["tracestate"] = headers["tracestate"]
        token = context.attach(TraceContextTextMapPropagator().extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            context.detach(token)

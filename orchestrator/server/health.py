"""``GET /healthz``: whether this server can serve a session now, not only whether it is up.

A session needs the bus to answer, to take writes, and to bring this process its wake-ups (every
waiting agent sleeps until one arrives), and it needs the server to be taking sessions at all.
``/healthz`` checks exactly that, cheaply: one wake-up round trip on the bus (:meth:`Bus.probe`:
on Redis a SUBSCRIBE, a PUBLISH and the message back through the process's one pub/sub reader,
within ``health_timeout_s``) and the session host's state. A ``PING`` alone was answered while
every session the server started hung at its first wait (issue 22). The answer is ``200
{"ok": true}`` or ``503 {"ok": false, "detail": why}``: a load balancer stops sending work, and
a person reads the reason.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from baton.errors import BatonError
from baton.server.context import ServerContext


async def serving_problem(ctx: ServerContext) -> str | None:
    """Why the server cannot serve a session now; None when it can."""
    if ctx.host.stopping:
        return "the server is stopping: it starts no more sessions"
    try:
        await ctx.bus.probe(ctx.config.health_timeout_s)
    except BatonError as exc:  # unreachable, closed, refused: each says what and where
        return str(exc)
    return None


async def health(request: Request) -> Response:
    problem = await serving_problem(ServerContext.of(request))
    if problem is not None:
        return JSONResponse({"ok": False, "detail": problem}, status_code=503,
                            headers={"Cache-Control": "no-store"})  # fmt: skip
    return JSONResponse({"ok": True}, headers={"Cache-Control": "no-store"})

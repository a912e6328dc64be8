"""The AG-UI routes, for ``baton serve`` and as an ASGI app a user mounts in their own.

``baton serve`` answers ``POST /ag-ui`` (a ``RunAgentInput`` in, ``text/event-stream`` out) and
``GET /ag-ui/capabilities`` behind its token guard, like every other route. :class:`AgUiApp` is
the same pair as an ASGI app of its own — ``POST /`` and ``GET /capabilities`` under wherever it
is mounted (``POST /agent/`` at ``/agent``: Starlette redirects the path without its slash),
with the media its runs link to under ``media/`` — that opens its own bus, sessions and workers
as an async context manager (run it from the host app's lifespan; a mounted app's own lifespan
is never run by Starlette)::

    agent = AgUiApp(ServerConfig(bus_url="redis://localhost:6379/0"))

    @asynccontextmanager
    async def lifespan(app):
        async with agent:
            yield

    app = FastAPI(lifespan=lifespan)
    app.mount("/agent", agent)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from baton.bus.base import Bus, BusOptions
from baton.bus.connect import open_bus
from baton.bus.errors import BusError
from baton.bus.lifecycle import Service
from baton.server.access import issue_read
from baton.server.ag_ui.capabilities import capabilities
from baton.server.ag_ui.inputs import read_input
from baton.server.ag_ui.plan import plan_run
from baton.server.ag_ui.stream import RunResponse, RunStream
from baton.server.config import ServerConfig
from baton.server.context import ServerContext
from baton.server.feeds import Feeds
from baton.server.host import SessionHost
from baton.server.media import media_file, public_url
from baton.server.security import BodyInvalid, TokenGuard
from baton.session.compose import resolve_profiles
from baton.subagents.profiles import Profile

PATH = "/ag-ui"


async def run_agent(request: Request) -> Response:
    """``POST``: a run. Everything the request cannot do is refused before the stream opens."""
    ctx = ServerContext.of(request)
    given = await read_input(request)
    try:
        plan = await plan_run(ctx, given)
        media = await _media_urls(ctx, request, [segment.session for segment in plan.segments])
    except BusError as exc:  # before the stream: the bus could not be asked, nothing was done
        raise HTTPException(503, f"the bus cannot be reached now: {exc}") from exc
    stream = RunStream(ctx, plan, media, list(ctx.host.profiles))
    return RunResponse(stream, ctx.config.heartbeat_s)  # type: ignore[return-value]


async def agent_capabilities(request: Request) -> Response:
    ctx = ServerContext.of(request)
    declared = capabilities(ctx.host.profiles.values(), ctx.config.session_timeout_s)
    return Response(declared.model_dump_json(by_alias=True), media_type="application/json")


async def _media_urls(
    ctx: ServerContext, request: Request, sessions: list[str]
) -> Callable[[str], Callable[[str], str]]:
    """For each session, its media as URLs the client's browser can open: a file of the media
    directory under this app's root (``/media/…``), with a read token of that session alone
    when the server checks tokens; a bucket's URL as it is (and any other ``file://`` URL as it
    is, which :mod:`.links` hides)."""
    mounted = str(request.scope.get("root_path", ""))  # where AgUiApp is mounted; "" in serve
    root = str(request.url.replace(path=mounted, query="", fragment="")).rstrip("/")
    tokens: dict[str, str] = {}
    if ctx.config.token is not None:
        for session in dict.fromkeys(sessions):
            tokens[session] = await issue_read(ctx.bus, session)

    def of(session: str) -> Callable[[str], str]:
        query = f"?token={tokens[session]}" if session in tokens else ""

        def url(value: str) -> str:
            path = public_url(value, ctx.media_root)
            return root + path + query if path.startswith("/") else path

        return url

    return of


def routes() -> list[BaseRoute]:
    """``baton serve``'s AG-UI routes."""
    return [
        Route(PATH, run_agent, methods=["POST"]),
        Route(PATH + "/capabilities", agent_capabilities, methods=["GET"]),
    ]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"detail": exc.detail, "errors": []}, status_code=exc.status_code,
                        headers=exc.headers)  # fmt: skip


async def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BodyInvalid)
    return JSONResponse({"detail": exc.detail, "errors": exc.errors}, status_code=422)


class AgUiApp(Service):
    """The AG-UI endpoint as an ASGI app to mount (see the module docstring): its own bus
    (``bus``, or the config's URL), the sessions it starts and their workers; a token when the
    config has one (the same rules as ``baton serve``)."""

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        bus: Bus | None = None,
        profiles: Mapping[str, Profile] | None = None,
    ) -> None:
        super().__init__()
        self.config = config or ServerConfig()
        self._given_bus = bus
        self._profiles = profiles
        self._app: Starlette | None = None
        self.ctx: ServerContext | None = None

    async def _open(self, stack: AsyncExitStack) -> None:
        config = self.config
        bus = self._given_bus
        if bus is None:
            options = BusOptions(signing_key=config.signing_key)
            bus = await stack.enter_async_context(
                open_bus(config.bus_url, options, prefix=config.prefix)
            )
        profiles = (
            self._profiles if self._profiles is not None else resolve_profiles(config.profiles)
        )
        media_root = config.media_dir.resolve()
        media_root.mkdir(parents=True, exist_ok=True)
        group = await stack.enter_async_context(anyio.create_task_group())
        host = SessionHost(
            bus, group, profiles, config.session_defaults, bus_outage_s=config.bus_outage_s
        )
        feeds = Feeds(bus, group, outage_s=config.bus_outage_s)
        self.ctx = ServerContext(config, bus, feeds, host, media_root, config.model)
        middleware = [] if config.token is None else [
            Middleware(TokenGuard, token=config.token, bus=bus)
        ]  # fmt: skip
        self._app = Starlette(
            routes=[
                Route("/", run_agent, methods=["POST"]),
                Route("/capabilities", agent_capabilities, methods=["GET"]),
                Route("/media/{path:path}", media_file, methods=["GET"]),
            ],
            middleware=middleware,
            exception_handlers={HTTPException: _http_error, BodyInvalid: _invalid},
        )
        self._app.state.baton = self.ctx
        stack.push_async_callback(self._stop)  # first out: sessions end while the bus is open

    async def _stop(self) -> None:
        assert self.ctx is not None
        with anyio.CancelScope(shield=True):
            await self.ctx.host.aclose()
            self.ctx.feeds.close()
            self.ctx.feeds.group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            if scope["type"] == "lifespan":
                return
            response = JSONResponse(
                {"detail": "the AG-UI app is not started: enter it (async with) in your "
                           "app's lifespan", "errors": []},
                status_code=503,
            )  # fmt: skip
            await response(scope, receive, send)
            return
        await self._app(scope, receive, send)

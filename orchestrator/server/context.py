"""What every route needs, in one object on ``app.state``: config, bus, feeds, session host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request

from baton.bus.base import Bus
from baton.bus.ids import name_problem
from baton.llm import ModelSettings
from baton.server.config import ServerConfig
from baton.server.feeds import Feeds
from baton.server.host import SessionHost


@dataclass(slots=True)
class ServerContext:
    config: ServerConfig
    bus: Bus
    feeds: Feeds
    host: SessionHost
    media_root: Path
    model: ModelSettings | None

    @staticmethod
    def of(request: Request) -> ServerContext:
        ctx: ServerContext = request.app.state.baton
        return ctx

    @staticmethod
    def session_id(request: Request) -> str:
        """The ``{id}`` path parameter, or 404 for one no session could have.

        Checked against the bus's one rule for session ids (:func:`baton.bus.ids.name_problem`):
        the route matches any path segment, and an id the envelope refuses would otherwise
        fail deep inside a route as a 500.
        """
        session = str(request.path_params["id"])
        problem = name_problem(session, "session id")
        if problem is not None:
            raise HTTPException(404, f"no session {session[:80]!r}: {problem}")
        return session

"""What every route needs, in one object on ``app.state``: config, bus, feeds, session host."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request

from baton.bus.base import Bus
from baton.llm import ModelSettings
from baton.server.config import ServerConfig
from baton.server.feeds import Feeds
from baton.server.host import SessionHost
from baton.server.schemas import NAME_PATTERN

_NAME = re.compile(NAME_PATTERN)


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
        """The ``{id}`` path parameter, or 404 for one no session could have."""
        session = str(request.path_params["id"])
        if not _NAME.match(session):
            raise HTTPException(404, f"no session {session[:80]!r}: not a session id")
        return session

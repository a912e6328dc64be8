"""Who a token lets in, and where: the admin token, and the tokens of one session.

The admin token (``--token``) opens everything. A session token opens one session, read-only or
read-write (docs/http.md, *Session tokens*). It is ``<session id>~<secret>``: the session id
says which session's record on the bus to look in (and lets a well-made token used on another
session be told apart from a made-up one: 403, not 401); the secret is 32 random bytes. The bus
keeps only the SHA-256 of each token with its scope, so the tokens of a session survive the
server that minted them and are honoured by every server sharing the bus.

What a scope permits is decided here from the method and the path alone, before any route runs
or anything is looked up, so an answer never depends on whether another session exists.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal

from starlette.exceptions import HTTPException

from baton.bus.base import Bus
from baton.bus.errors import BusError
from baton.bus.ids import name_problem
from baton.server.context import ServerContext
from baton.server.schemas import SessionTokens

Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")
SEPARATOR = "~"
"""Between the session id and the secret: a character no session id has (``baton.bus.ids``)
and that URLs, headers and cookies carry as it is."""
SECRET_BYTES = 32

READ_ONLY = frozenset({"GET", "HEAD"})
SESSION_READS = frozenset({"state", "events"})
SESSION_WRITES = frozenset({"messages", "cancel"})
ANSWERS = frozenset({"approvals", "questions"})
"""``/sessions/{id}/<one of these>/{id}``: answers to what the session's agents ask a person."""
SHARED = ("assets", "favicon.ico")
"""What every page needs whoever opened it: the page's scripts, styles and icon (no data)."""


def digest(token: str) -> str:
    """How a token is kept on the bus: the hex SHA-256 (the token itself is never stored)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def mint(session: str) -> dict[Scope, str]:
    """A fresh token of each scope for ``session``."""
    return {scope: f"{session}{SEPARATOR}{secrets.token_urlsafe(SECRET_BYTES)}" for scope in SCOPES}


async def issue(bus: Bus, session: str) -> dict[Scope, str]:
    """Mint the session's tokens and record their digests on the bus; returns the tokens."""
    tokens = mint(session)
    await bus.store.put(
        session, "tokens", {digest(token): scope for scope, token in tokens.items()}
    )
    return tokens


async def issue_read(bus: Bus, session: str) -> str:
    """A fresh read token of ``session`` alone, recorded on the bus: what makes a media URL
    handed to a browser (an AG-UI run's, docs/ag-ui.md) open with the session's files and
    nothing else. The admin token never goes into a URL."""
    token = f"{session}{SEPARATOR}{secrets.token_urlsafe(SECRET_BYTES)}"
    await bus.store.put(session, "tokens", {digest(token): "read"})
    return token


async def session_tokens(ctx: ServerContext, session: str) -> SessionTokens | None:
    """A session just started over HTTP: its own tokens, for the ``201``; None on a server
    without a token, which checks none. A bus that cannot keep them fails the request (503):
    the session runs, and the admin token still reaches it."""
    if ctx.config.token is None:
        return None
    try:
        tokens = await issue(ctx.bus, session)
    except BusError as exc:
        raise HTTPException(
            503, f"session {session!r} started, but its tokens could not be stored: {exc}"
        ) from exc
    return SessionTokens(read=tokens["read"], write=tokens["write"])


def session_of(token: str) -> str | None:
    """The session a token names, or None when it is not shaped like a session token."""
    session, separator, secret = token.partition(SEPARATOR)
    if not separator or not secret or name_problem(session, "session id") is not None:
        return None
    return session


@dataclass(frozen=True, slots=True)
class Grant:
    """What one session token opens: its session, read-only or read-write."""

    session: str
    scope: Scope

    def refusal(self, method: str, path: str) -> str | None:
        """Why this token may not make the request (the ``403`` detail); None when it may."""
        parts = path.split("/")[1:]
        if parts[:1] == ["sessions"] and len(parts) >= 2:
            return self._session_route(method, parts[1], parts[2:])
        if parts[:1] == ["media"] and len(parts) >= 3:
            if parts[1] != self.session:
                return self._elsewhere()
            if method not in READ_ONLY or any(p in ("", ".", "..") or "\\" in p for p in parts):
                return self._not_here()
            return None
        if method in READ_ONLY and (
            parts == ["favicon.ico"] or (len(parts) == 2 and parts[0] == "assets")
        ):
            return None
        return self._not_here()

    def _session_route(self, method: str, session: str, rest: list[str]) -> str | None:
        if session != self.session:
            return self._elsewhere()
        reads = not rest or (len(rest) == 1 and rest[0] in SESSION_READS)
        if reads and method in READ_ONLY:
            return None
        writes = (len(rest) == 1 and rest[0] in SESSION_WRITES) or (
            len(rest) == 2 and rest[0] in ANSWERS and rest[1] != ""
        )
        if writes and method == "POST":
            if self.scope == "write":
                return None
            return (
                f"this token of session {self.session!r} is read-only: it cannot post, answer "
                "questions or cancel; use the session's write token or the admin token"
            )
        return self._not_here()

    def _elsewhere(self) -> str:
        return (
            f"this token is for session {self.session!r} only; another session needs its own "
            "token or the admin token"
        )

    def _not_here(self) -> str:
        return (
            f"this token is for session {self.session!r} only (its page, state, events, media"
            f"{', messages, approvals, questions, cancel' if self.scope == 'write' else ''}); "
            "this route needs the admin token"
        )


async def session_grant(bus: Bus, token: str) -> Grant | None:
    """The grant of a session token the bus knows; None for any other token.

    Raises the bus's error when it cannot be asked (the caller answers 503, never a grant)."""
    session = session_of(token)
    if session is None:
        return None
    match await bus.store.get(session, "tokens", digest(token)):
        case "read":
            return Grant(session, "read")
        case "write":
            return Grant(session, "write")
        case _:  # unknown, or a value written by hand: no grant
            return None

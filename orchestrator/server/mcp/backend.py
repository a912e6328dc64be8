"""What the MCP server works with: the bus, the session host and the session settings — the
same ones ``baton serve``'s HTTP API uses (``baton mcp`` builds its own, over stdio).

Starting a session is :meth:`McpBackend.start`, as ``POST /sessions`` starts one (the server's
profiles, model, media store and timeout cap); the session runs in the host's task group, so it
outlives the call that started it (a task's session must). Cancelling reaches any session of the
bus: one this process runs is cancelled here; any other gets a ``shutdown`` from the user in its
lead's inbox, the path ``baton cancel`` takes (docs/protocol.md, *How agents and sessions end*).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp.server.request_state import RequestStateSecurity

from baton.bus.base import DEFAULT_RETENTION_S, Bus
from baton.bus.errors import SessionNotRunning
from baton.bus.messages import make_envelope
from baton.bus.user_post import USER
from baton.lead.keeper import lead_lost
from baton.server.approval_policy import ApprovalTooLoose, session_approve
from baton.server.config import ServerConfig
from baton.server.context import ServerContext
from baton.server.host import SessionHost
from baton.server.mcp.schemas import RunArguments
from baton.session import SessionConfig
from baton.session.view import LEAD_NAME

STATE_AUDIENCE = "baton"
"""The audience sealed into a 2026-07-28 ``requestState`` (the SDK's claim): this service."""


class CallRefused(Exception):
    """A tool call that cannot be done as asked (an unknown profile, a session that finished):
    its result is an error with this one line, and nothing changed."""


def state_security(token: str | None) -> RequestStateSecurity:
    """How ``requestState`` is sealed (AES-GCM, by the SDK's boundary): under a key derived from
    the server's token when it has one, so every ``baton serve`` sharing the token (and a
    restarted one) opens a retry's state; else under a key of this process alone (``baton mcp``,
    a loopback server without a token), where a retry to another process is refused."""
    if token is None:
        return RequestStateSecurity.ephemeral(audience=STATE_AUDIENCE)
    key = hashlib.sha256(b"baton mcp requestState\x00" + token.encode()).hexdigest()
    return RequestStateSecurity(keys=[key], audience=STATE_AUDIENCE)


@dataclass(slots=True)
class McpBackend:
    """The bus, the session host and the settings the tools use (see the module docstring).
    ``served``: over ``baton serve``'s HTTP (media are then linked through its ``/media/``)."""

    bus: Bus
    host: SessionHost
    config: ServerConfig
    media_root: Path
    served: bool
    asking: dict[str, anyio.CancelScope] = field(default_factory=dict)
    """The questions an elicitation of this process is out for (:mod:`.askers`' claims)."""
    known: dict[str, anyio.Event] = field(default_factory=dict)
    """2025-11-25 tasks this process watches, each set once its client asked about it
    (:class:`~.task_methods.TaskWatch` side-channels a question only then)."""

    def task_known(self, task_id: str) -> None:
        """The client named ``task_id`` in a task request: it has the task's id now."""
        event = self.known.get(task_id)
        if event is not None:
            event.set()

    @classmethod
    def of_server(cls, ctx: ServerContext) -> McpBackend:
        return cls(ctx.bus, ctx.host, ctx.config, ctx.media_root, served=True)

    def session_config(self, args: RunArguments) -> SessionConfig:
        """The session ``run`` starts, as ``POST /sessions`` would start it: :class:`CallRefused`
        for approvals looser than the server's policy (nothing starts)."""
        asked = args.approve if "approve" in args.model_fields_set else None
        try:
            approve = session_approve(asked, self.config.approve)
        except ApprovalTooLoose as exc:
            raise CallRefused(str(exc)) from exc
        profiles = self.host.profiles
        if args.profiles is not None:
            unknown = [name for name in args.profiles if name not in profiles]
            if unknown:
                known = ", ".join(sorted(profiles))
                raise CallRefused(f"profiles: unknown profile {unknown[0]!r} (known: {known})")
            profiles = {name: profiles[name] for name in args.profiles}
        config = self.config
        timeout = min(args.timeout_s or config.session_timeout_s, config.max_session_timeout_s)
        return SessionConfig(
            task=args.task,
            bus_url=self.bus.url,
            model=config.model,
            profiles=profiles,
            approve=approve,
            timeout_s=timeout,
            media_dir=self.media_root,
            media=config.media,
            images=config.images,
        )

    async def start(self, args: RunArguments) -> str:
        """Start a session for ``run``; returns its id once it runs."""
        if self.host.stopping:
            raise CallRefused("the server is stopping: call run on another one")
        return await self.host.start(self.session_config(args))

    def retention_s(self) -> float:
        """How long a finished session's keys stay on the bus (its tasks' with them)."""
        value = self.host.defaults.get("retention_s", DEFAULT_RETENTION_S)
        return float(value) if isinstance(value, int | float) else DEFAULT_RETENTION_S

    async def cancel(self, session: str) -> None:
        """Cancel ``session`` wherever it runs; :class:`CallRefused` when nothing runs it."""
        if self.host.cancel(session):
            return
        problem = await self.bus.key_problem(session, sender="this MCP server")
        if problem is not None:
            raise CallRefused(f"nothing sent to session {session}: {problem}")
        if await lead_lost(self.bus, session):
            raise CallRefused(
                f"session {session}: its lead is gone (its process died), so nothing runs it to "
                f"cancel; `baton resume {session}` continues it"
            )
        shutdown = make_envelope(session=session, sender=USER, recipient=LEAD_NAME,
                                 type="shutdown", content="cancelled over MCP")  # fmt: skip
        try:
            await self.bus.inboxes.send_if_running(shutdown)
        except SessionNotRunning as exc:
            if not exc.status:
                raise CallRefused(f"no session {session} on this bus") from exc
            raise CallRefused(
                f"session {session} is not running ({exc.status}): it has ended, or its lead has "
                "given its answer"
            ) from exc

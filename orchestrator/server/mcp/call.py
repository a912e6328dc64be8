"""One MCP request, as the tools and task methods need it: the backend, the protocol era, what
the client declared it can do, its progress channel and how media look to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from baton.server.mcp.backend import McpBackend
from baton.server.mcp.media import MediaView
from baton.server.mcp.revisions import has_elicitation

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"


@dataclass(slots=True)
class Call:
    """A request in flight (see the module docstring)."""

    ctx: ServerRequestContext[Any, Any]
    backend: McpBackend
    _lines: int = 0

    @property
    def modern(self) -> bool:
        """A 2026-07-28 request (per-request envelope, no server-to-client requests)."""
        return self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def can_elicit(self) -> bool:
        """Whether the client can put a form to its user: it declared elicitation (an empty
        capability is form mode) and, on 2025-11-25, this call can carry a request to it."""
        capabilities = self.ctx.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        if elicitation is None:
            return False
        if elicitation.form is None and elicitation.url is not None:
            return False  # URL mode only
        if not has_elicitation(self.ctx.protocol_version):
            return False  # a revision before elicitation (:mod:`.revisions`)
        return self.modern or self.ctx.session.can_send_request

    @property
    def declared_tasks(self) -> bool:
        """Whether the client declared the tasks extension on this (2026-07-28) request."""
        capabilities = self.ctx.session.client_capabilities
        extensions = capabilities.extensions if capabilities is not None else None
        return bool(extensions) and TASKS_EXTENSION in (extensions or {})

    @property
    def progress_token(self) -> str | int | None:
        raw = (self.ctx.params or {}).get("_meta")
        token = raw.get("progressToken") if isinstance(raw, dict) else None
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None

    async def report(self, line: str) -> None:
        """One progress line (``notifications/progress``, when the client sent a token)."""
        self._lines += 1
        await self.ctx.session.report_progress(float(self._lines), None, line)

    def media(self) -> MediaView:
        """How media look to this client: over ``baton serve``, linked through its URL."""
        base: str | None = None
        request = self.ctx.request
        if self.backend.served and isinstance(request, Request):
            base = str(request.base_url).rstrip("/")
        return MediaView(self.backend.media_root, base)

    async def elicit(self, params: dict[str, Any], task_id: str | None = None) -> ElicitResult:
        """Put one form to the client's user on this call's channel (2025-11-25); ``task_id``
        relates it to a task (``tasks/result``)."""
        return await elicit_on(self.ctx.session, params, task_id, self.ctx.request_id)


async def elicit_on(
    peer: ServerSession,
    params: dict[str, Any],
    task_id: str | None = None,
    request_id: RequestId | None = None,
) -> ElicitResult:
    """Send one ``elicitation/create`` to the client of ``peer``: on the stream of request
    ``request_id``, or (None) on the connection's own channel; related to task ``task_id``."""
    meta: dict[str, Any] = {RELATED_TASK: {"taskId": task_id}} if task_id else {}
    form = ElicitRequestFormParams.model_validate({**params, **({"_meta": meta} if meta else {})})
    related = None if request_id is None else ServerMessageMetadata(related_request_id=request_id)
    return await peer.send_request(ElicitRequest(params=form), ElicitResult, metadata=related)

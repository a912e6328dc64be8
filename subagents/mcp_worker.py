"""A worker's MCP servers: opened with the worker, their tools added to a profile on its first
agent, closed with the worker; and the lead's (:func:`lead_tools`), for the session to call.

Kept apart from :mod:`baton.subagents.mcp` so a worker whose profiles declare no MCP server never
imports the ``mcp`` package (an optional extra, and a heavy import), and one whose profiles do,
but lacks the package, stops at once with one line saying what to install.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING

import anyio

from baton.engine import Tool, ToolRegistry
from baton.media import MediaStore
from baton.subagents.mcp_config import McpNotInstalled, McpServerConfig
from baton.subagents.profiles import Profile

if TYPE_CHECKING:
    from baton.subagents.mcp import McpServers


class WorkerMcp:
    """The MCP side of one worker's profiles (nothing at all when none declares a server)."""

    def __init__(self, profiles: Mapping[str, Profile], owner: str) -> None:
        self._declaring = sorted(name for name, profile in profiles.items() if profile.mcp)
        self._owner = owner
        self._servers: McpServers | None = None
        self._ready: dict[str, ToolRegistry] = {}
        self._lock: anyio.Lock | None = None

    @property
    def servers(self) -> McpServers | None:
        """The connections, once :meth:`open` made them (None: no profile declares a server)."""
        return self._servers

    def open(self) -> AbstractAsyncContextManager[object]:
        """What ``async with`` opens for the worker's lifetime: its servers' connections (each
        started lazily), or nothing. Raises ``McpNotInstalled`` without the ``mcp`` package."""
        if not self._declaring:
            return contextlib.nullcontext()
        try:
            from baton.subagents.mcp import McpServers
        except ImportError as exc:
            named = ", ".join(repr(name) for name in self._declaring)
            raise McpNotInstalled(f"worker {self._owner}: profile {named}") from exc
        self._servers = McpServers()
        return self._servers

    async def registry(self, profile: Profile, static: ToolRegistry) -> ToolRegistry:
        """``static`` (the profile's Python tools) with its MCP servers' tools added, starting the
        servers on the first call; raises ``McpServerUnavailable`` naming the profile and the
        server. A profile without servers gets ``static`` back."""
        if not profile.mcp:
            return static
        found = self._ready.get(profile.name)
        if found is not None:
            return found
        if self._servers is None:
            raise RuntimeError("the worker's MCP servers are not open (Worker.run opens them)")
        from baton.subagents.mcp import agent_media

        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # agents of one profile arriving together start it once
            found = self._ready.get(profile.name)
            if found is None:
                owner = f"profile {profile.name!r}"
                made = await self._servers.tools_for(
                    owner, profile.mcp, agent_media, taken=static.names
                )
                found = self._ready[profile.name] = ToolRegistry([*static, *made])
        return found


async def lead_tools(
    stack: AsyncExitStack,
    servers: Mapping[str, McpServerConfig],
    store: MediaStore,
    session: str,
) -> list[Tool]:
    """The tools of the lead's MCP servers, started now (the lead's tools are fixed when it is
    built) and closed when ``stack`` unwinds; their media go to ``store`` as
    ``<session>/lead-mcp-<digest>.<ext>``. Raises ``McpServerUnavailable`` naming the server."""
    if not servers:
        return []
    try:
        from baton.subagents.mcp import McpServers, store_media
    except ImportError as exc:
        raise McpNotInstalled("the lead") from exc
    pool = await stack.enter_async_context(McpServers())
    made: list[Tool] = [
        *await pool.tools_for("the lead", servers, store_media(store, f"{session}/lead"))
    ]
    return made

"""How an MCP server is declared: in a profile (``[profiles.<name>.mcp.<server>]``), for the lead
(``[lead.mcp.<server>]``), or in Python (:class:`McpServerConfig`).

This module reads no ``mcp`` package: a profiles file with MCP servers loads (and is checked) in
any process, and only a process that starts the servers needs the optional ``mcp`` extra
(:mod:`baton.subagents.mcp`). Which tools an agent sees (``allow``) and which need a person's
approval (``approve``) are decided here, by glob, against the names the server gives its tools.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baton.bus.redact import redact_url
from baton.errors import ConfigError, install_hint

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a server may be called: it appears in tool sources (``mcp:<server>``) and messages."""

DEFAULT_STARTUP_TIMEOUT_S = 30.0


class McpServerConfig(BaseModel):
    """One MCP server: ``command`` (with ``args``, ``env``, ``cwd``) starts it as a subprocess
    spoken to over stdio; ``url`` (with ``headers``) reaches it over streamable HTTP.

    ``allow`` (globs, default every tool) picks the tools an agent is offered; ``approve``
    (globs, default none) the ones a person must approve before each call. ``timeout_s`` and
    ``max_result_chars`` apply to each of its tools (default: the profile's ``tool_timeout_s`` and
    ``max_result_chars``); ``startup_timeout_s`` bounds starting it and listing its tools.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    command: str | None = Field(None, min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = Field(None, min_length=1)
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    allow: tuple[str, ...] = ("*",)
    approve: tuple[str, ...] = ()
    timeout_s: float | None = Field(None, gt=0)
    max_result_chars: int | None = Field(None, ge=1)
    startup_timeout_s: float = Field(DEFAULT_STARTUP_TIMEOUT_S, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP), not both")
        if self.url is not None and (self.args or self.env or self.cwd is not None):
            raise ValueError("args, env and cwd are for a command (stdio), not a url")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url (streamable HTTP), not a command")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def allows(self, tool: str) -> bool:
        """Whether an agent is offered the server's tool ``tool``."""
        return any(fnmatchcase(tool, pattern) for pattern in self.allow)

    def gated(self, tool: str) -> bool:
        """Whether each call of ``tool`` waits for a person's approval."""
        return any(fnmatchcase(tool, pattern) for pattern in self.approve)

    def where(self) -> str:
        """The server as a person would recognise it in an error (a URL's credentials hidden)."""
        if self.url is not None:
            return redact_url(self.url)
        return " ".join((self.command or "", *self.args))


class McpServerUnavailable(ConfigError):
    """An MCP server cannot be started or reached; the message names the owner (a profile, or
    the lead) and the server, because a worker that only says "connection refused" leaves the
    reader to guess which of its servers it meant."""

    def __init__(self, owner: str, server: str, problem: str) -> None:
        super().__init__(f"{owner}: MCP server {server!r} cannot start: {problem}")
        self.owner = owner
        self.server = server
        self.problem = problem


class McpNotInstalled(ConfigError):
    """A profile declares MCP servers, but this process lacks the optional ``mcp`` package."""

    def __init__(self, owner: str) -> None:
        super().__init__(
            f"{owner} declares MCP servers, but the `mcp` package is not installed here: "
            + install_hint("mcp")
        )


def check_server_name(name: str) -> str | None:
    """Why ``name`` cannot name a server, or None when it can."""
    if SERVER_NAME.fullmatch(name):
        return None
    return f"server name {name!r} must be 1-64 letters, digits, '_' or '-'"

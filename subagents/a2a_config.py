"""How a remote A2A agent is declared as a profile (``kind = "a2a"``), read without the SDK.

A profiles file with remote agents loads (and is checked) in any process: only a worker that hosts
one of them, or a session that must read a card for a description, needs the optional ``a2a``
extra (the official ``a2a-sdk``). A worker without it refuses such a profile's agents with an
error result that names the profile and what to install (:class:`A2ANotInstalled`), so the lead
reads why instead of waiting for a report that never comes.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from baton.bus.redact import redact_text, redact_url
from baton.errors import ConfigError, install_hint

A2A_KIND: Literal["a2a"] = "a2a"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_CONNECT_RETRIES = 3


class A2AConfig(BaseModel):
    """A remote A2A agent: where it is and how to reach it.

    ``url`` is the agent's root (its card is at ``<url>/.well-known/agent-card.json``);
    ``headers`` go with every request, and ``token_env`` names the variable whose value is sent
    as ``Authorization: Bearer <token>`` (read when the worker first reaches the agent, so the
    token itself is never written in a profiles file). ``timeout_s`` bounds how long one
    exchange with the remote may go without reaching an end (a person's answer to its question
    is bounded by the profile's ``approval_timeout_s`` instead); ``connect_retries`` is how many
    times a request that could not connect is tried again before the agent reports an error.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    url: str = Field(pattern=r"^https?://\S+$")
    headers: dict[str, str] = Field(default_factory=dict)
    token_env: str | None = Field(None, min_length=1)
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0)
    connect_retries: int = Field(DEFAULT_CONNECT_RETRIES, ge=0, le=10)

    @property
    def shown_url(self) -> str:
        """``url`` as messages and logs show it: its credentials (a password, ``?token=``)
        hidden."""
        return redact_url(self.url)

    def redacted(self, text: str) -> str:
        """``text`` (an error of the SDK or of httpx, which may quote the URL) with ``url``'s
        credentials hidden."""
        return redact_text(text, self.url)

    def request_headers(self) -> dict[str, str]:
        """``headers`` with the bearer token of ``token_env`` (raises ``ConfigError`` when the
        variable is unset: an agent that would be refused by the remote is refused here)."""
        headers = dict(self.headers)
        if self.token_env is not None:
            token = os.environ.get(self.token_env)
            if not token:
                raise ConfigError(
                    f"the remote A2A agent at {self.shown_url} needs a token, but "
                    f"${self.token_env} is not set"
                )
            headers["Authorization"] = f"Bearer {token}"
        return headers


class A2ANotInstalled(ConfigError):
    """A profile is a remote A2A agent, but this process lacks the optional ``a2a-sdk``."""

    def __init__(self, profiles: str) -> None:
        super().__init__(
            f'profile {profiles} is a remote A2A agent (kind = "a2a"), but the a2a-sdk is not '
            f"installed here: {install_hint('a2a')}"
        )

"""What a ``baton serve`` process is told: where to listen, which bus, who may call it.

The security rule lives here so it is checked once, before anything listens: a server bound to
any address other than loopback must have a bearer token, because everything it serves (starting
sessions, approving tool calls, the media the tools wrote) is as powerful as the CLI itself.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr, ValidationError

from baton.bus.messages import ApproveMode
from baton.bus.retry import DEFAULT_OUTAGE_S
from baton.engine.questions import UPLOAD_MAX_BYTES
from baton.errors import ConfigError
from baton.llm import ModelSettings
from baton.media import MediaStore
from baton.session import SessionConfig
from baton.session.validation import describe_validation
from baton.subagents.images import ImageGenerator

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8321
DEFAULT_MAX_BODY_BYTES = 64 * 1024
DEFAULT_HEARTBEAT_S = 15.0
DEFAULT_RETRY_MS = 3000
MAX_SESSION_TIMEOUT_S = 3600.0
DEFAULT_HEALTH_TIMEOUT_S = 2.0


def check_session_defaults(defaults: Mapping[str, object]) -> None:
    """Refuse defaults that no session could take (checked once, as the server starts, since a
    session started with them takes them as they are)."""
    try:
        SessionConfig.model_validate({"task": "check the defaults", **defaults})
    except ValidationError as exc:
        raise ConfigError(f"bad session default: {describe_validation(exc)}") from exc


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); False for the rest,
    including ``0.0.0.0``/``::`` (every interface) and any host name."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server needs that can be written down.

    ``token``: the bearer token every request must carry; required (a ``ConfigError`` otherwise)
    when ``host`` is not loopback, and enforced on every route whenever it is set — including on
    loopback, where it is optional. ``model=None`` runs sessions on the offline model;
    ``session_defaults`` are :class:`~baton.session.SessionConfig` fields (the lead's tool choice,
    the budget and the like) every session gets where the request that starts it does not say;
    a name that is no such field, or a value it refuses, is a ``ConfigError``.
    ``bus_outage_s`` is how long the sessions and the SSE feeds ride out a bus outage.
    ``approve`` is the server's approval policy, a ceiling on what its clients ask for.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    bus_url: str = "memory://"
    prefix: str = "baton"
    signing_key: SecretStr | None = None
    """Sign what the server sends on the bus and refuse unsigned envelopes (docs/protocol.md)."""
    token: str | None = None
    model: ModelSettings | None = None
    session_defaults: Mapping[str, object] = field(default_factory=dict)
    profiles: Path | None = None
    media_dir: Path = Path("media")
    media: MediaStore | None = None
    """Where the sessions' tools put media (docs/media.md); None: a folder, ``media_dir``."""
    images: ImageGenerator | None = None
    """What draws ``generate_image``'s pictures; None: the offline painter."""
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    upload_max_bytes: int = UPLOAD_MAX_BYTES
    """The largest file a person may upload in answer to a question (multipart, not JSON)."""
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    retry_ms: int = DEFAULT_RETRY_MS
    session_timeout_s: float = 600.0
    bus_outage_s: float = DEFAULT_OUTAGE_S
    max_session_timeout_s: float = MAX_SESSION_TIMEOUT_S
    health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S
    """How long ``/healthz`` gives the bus to carry one wake-up before it answers 503."""
    log_level: str = "warning"
    approve: ApproveMode = "ask"
    """The approval policy: the loosest approvals a client may ask for a session it starts
    (:mod:`baton.server.approval_policy`); stricter ones it may always ask for."""

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            object.__setattr__(self, "token", None)
        if not is_loopback(self.host) and self.token is None:
            raise ConfigError(
                f"refusing to listen on {self.host} without a token: anyone who can reach it "
                "could start sessions and approve tool calls. Give --token (or BATON_TOKEN), "
                "or bind to 127.0.0.1"
            )
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("the token is too short: use at least 16 characters")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"bad port {self.port}: use 0..65535")
        if self.max_body_bytes < 1024:
            raise ConfigError(f"max body size {self.max_body_bytes} is too small: use ≥ 1024")
        if self.upload_max_bytes < 1:
            raise ConfigError(f"upload size limit must be positive, not {self.upload_max_bytes}")
        if self.heartbeat_s <= 0:
            raise ConfigError(f"heartbeat must be positive, not {self.heartbeat_s}")
        if self.health_timeout_s <= 0:
            raise ConfigError(f"health timeout must be positive, not {self.health_timeout_s}")
        check_session_defaults(self.session_defaults)

    @property
    def requires_token(self) -> bool:
        return self.token is not None

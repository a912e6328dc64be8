"""What both backends can be tuned by (:class:`BusOptions`), and the defaults behind it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import SecretStr

from baton.bus.ids import new_id
from baton.bus.messages import DEFAULT_MAX_MESSAGE_BYTES

DEFAULT_LEASE_S = 30.0
DEFAULT_EVENT_LOG_CAP = 10_000


@dataclass(slots=True)
class BusOptions:
    """Tunables shared by both backends."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    lease_s: float = DEFAULT_LEASE_S
    event_log_cap: int = DEFAULT_EVENT_LOG_CAP
    consumer: str = field(default_factory=lambda: f"c-{new_id()[-12:]}")
    signing_key: SecretStr | None = None
    """Sign every envelope sent and refuse unsigned or wrongly signed ones on every inbox read
    (:mod:`baton.bus.signing`); None (the default): envelopes are neither signed nor checked."""

"""What both backends can be tuned by (:class:`BusOptions`), and the defaults behind it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import SecretStr

from baton.bus.ids import new_id
from baton.bus.messages import DEFAULT_MAX_MESSAGE_BYTES

DEFAULT_LEASE_S = 30.0
DEFAULT_EVENT_LOG_CAP = 10_000
DEFAULT_OUTAGE_S = 120.0
"""The outage a session, ``baton watch`` and ``baton serve`` ride out by default
(``bus_outage_s``): twice the 60 s a Redis restart or failover is planned to take."""


@dataclass(slots=True)
class BusOptions:
    """Tunables shared by both backends."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    lease_s: float = DEFAULT_LEASE_S
    event_log_cap: int = DEFAULT_EVENT_LOG_CAP
    consumer: str = field(default_factory=lambda: f"c-{new_id()[-12:]}")
    outage_s: float = DEFAULT_OUTAGE_S
    """How long starting the bus rides out faults once the server has answered (a Cluster whose
    map was read while a master fails over, a server still loading its data): the session's, the
    server's or the command's ``bus_outage``. A URL that names no node that answers at all fails
    at once, whatever this says. Operations after the start are bounded by their callers
    (:func:`~baton.bus.retry.persist`)."""
    signing_key: SecretStr | None = None
    """Sign every envelope sent and refuse unsigned or wrongly signed ones on every inbox read
    (:mod:`baton.bus.signing`); None (the default): envelopes are neither signed nor checked."""
